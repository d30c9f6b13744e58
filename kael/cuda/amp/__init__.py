"""kael.cuda.amp: torch.cuda.amp's deprecated names (GradScaler, autocast) for kael.amp's, which
take the device type as their first argument."""
from kael.cuda.amp.common import amp_definitely_not_available
from kael.cuda.amp.grad_scaler import GradScaler

# torch.cuda.amp's deprecated autocast, custom_fwd and custom_bwd are in
# kael/cuda/amp/autocast_mode.py; the coordinator enables this line and adds the names to
# __all__ (docs/decisions/namespaces.md):
# from kael.cuda.amp.autocast_mode import autocast, custom_bwd, custom_fwd  # noqa

__all__ = ["GradScaler", "amp_definitely_not_available"]
