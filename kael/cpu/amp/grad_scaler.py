"""torch.cpu.amp.GradScaler: kael.amp.GradScaler('cpu', ...) under its deprecated name."""
from __future__ import annotations

import warnings

from kael.amp.grad_scaler import GradScaler as _GradScaler

__all__ = ["GradScaler"]


class GradScaler(_GradScaler):
    """Deprecated: kael.amp.GradScaler('cpu', init_scale, growth_factor, backoff_factor,
    growth_interval, enabled) (a FutureWarning)."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        warnings.warn("`kael.cpu.amp.GradScaler(args...)` is deprecated. "
                      "Please use `kael.amp.GradScaler('cpu', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cpu", init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)
