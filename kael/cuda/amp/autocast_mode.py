"""torch.cuda.amp's autocast, custom_fwd and custom_bwd: kael.amp's with device_type='cuda',
under their deprecated names (each warns with a FutureWarning)."""
from __future__ import annotations

import functools
import warnings

import kael
from kael.amp import autocast_mode as _amp

__all__ = ["autocast", "custom_bwd", "custom_fwd"]


class autocast(_amp.autocast):
    """Deprecated: kael.amp.autocast('cuda', enabled, dtype, cache_enabled)."""

    def __init__(self, enabled: bool = True, dtype: kael.dtype = kael.float16, cache_enabled: bool = True):
        warnings.warn("`kael.cuda.amp.autocast(args...)` is deprecated. "
                      "Please use `kael.amp.autocast('cuda', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cuda", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """Deprecated: kael.amp.custom_fwd(fwd, device_type='cuda', cast_inputs=...)."""
    warnings.warn("`kael.cuda.amp.custom_fwd(args...)` is deprecated. "
                  "Please use `kael.amp.custom_fwd(args..., device_type='cuda')` instead.", FutureWarning, stacklevel=2)
    if fwd is None:
        return functools.partial(_amp.custom_fwd, device_type="cuda", cast_inputs=cast_inputs)
    return _amp.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    """Deprecated: kael.amp.custom_bwd(bwd, device_type='cuda')."""
    warnings.warn("`kael.cuda.amp.custom_bwd(args...)` is deprecated. "
                  "Please use `kael.amp.custom_bwd(args..., device_type='cuda')` instead.", FutureWarning, stacklevel=2)
    if bwd is None:
        return functools.partial(_amp.custom_bwd, device_type="cuda")
    return _amp.custom_bwd(bwd, device_type="cuda")
