"""torch.optim.asgd's path: kael.optim.ASGD (defined in kael/optim/rprop.py)."""
from kael.optim.rprop import ASGD  # noqa: F401

__all__ = ["ASGD"]
