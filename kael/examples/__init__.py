"""Runnable examples: python -m kael.examples.charlm trains a character-level language model."""
