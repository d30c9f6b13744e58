"""Grad-mode helpers shared by kael.nn and kael.optim.

no_grad() is kael.no_grad() where the autograd engine provides it; parameter updates and
initialisers run inside it so they are never recorded in a graph.
"""
import contextlib

import kael


def no_grad():
    guard = getattr(kael, "no_grad", None)
    return guard() if guard is not None else contextlib.nullcontext()
