"""Grad-mode helper shared by kael.nn and kael.optim.

no_grad() is kael.no_grad(), looked up at call time because kael/__init__.py imports kael.nn
before kael.autograd. Parameter updates and initialisers run inside it, so they are never
recorded in a graph.
"""
import kael


def no_grad():
    return kael.no_grad()
