"""kael.amp: automatic mixed precision, as torch.amp: GradScaler (loss scaling, kael/amp/grad_scaler.py)
and autocast (kael/amp/autocast_mode.py)."""
from kael.amp.grad_scaler import GradScaler  # noqa: F401

# autocast and its helpers live in kael/amp/autocast_mode.py (docs/decisions/autocast.md)
from kael.amp.autocast_mode import autocast, custom_bwd, custom_fwd, is_autocast_available  # noqa: F401,E402

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd", "is_autocast_available"]
