"""kael.cuda.amp: torch.cuda.amp's deprecated names (GradScaler, autocast) for kael.amp's, which
take the device type as their first argument."""
from kael.cuda.amp.common import amp_definitely_not_available
from kael.cuda.amp.grad_scaler import GradScaler

from kael.cuda.amp.autocast_mode import autocast, custom_bwd, custom_fwd

__all__ = ["GradScaler", "amp_definitely_not_available", "autocast", "custom_bwd", "custom_fwd"]
