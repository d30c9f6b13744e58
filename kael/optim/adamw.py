"""torch.optim.adamw's path: kael.optim.AdamW (defined in kael/optim/adam.py)."""
from kael.optim.adam import AdamW  # noqa: F401

__all__ = ["AdamW"]
