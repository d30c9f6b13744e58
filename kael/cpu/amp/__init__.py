"""kael.cpu.amp: torch.cpu.amp's deprecated autocast and GradScaler, for kael.amp's with
device 'cpu'."""
from kael.cpu.amp.autocast_mode import autocast  # noqa: F401
from kael.cpu.amp.grad_scaler import GradScaler  # noqa: F401

__all__ = ["GradScaler", "autocast"]
