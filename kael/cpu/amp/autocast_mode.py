"""torch.cpu.amp.autocast: kael.amp.autocast('cpu', ...) under its deprecated name."""
from __future__ import annotations

import warnings

import kael
from kael.amp.autocast_mode import autocast as _autocast

__all__ = ["autocast"]


class autocast(_autocast):
    """Deprecated: kael.amp.autocast('cpu', enabled, dtype, cache_enabled) (a FutureWarning)."""

    def __init__(self, enabled: bool = True, dtype: kael.dtype = kael.bfloat16, cache_enabled: bool = True):
        warnings.warn("`kael.cpu.amp.autocast(args...)` is deprecated. "
                      "Please use `kael.amp.autocast('cpu', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)
