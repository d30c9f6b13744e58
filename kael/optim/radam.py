"""torch.optim.radam's path: kael.optim.RAdam (defined in kael/optim/nadam.py)."""
from kael.optim.nadam import RAdam  # noqa: F401

__all__ = ["RAdam"]
