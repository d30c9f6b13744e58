"""kael.backends.cuda: the CUDA switches of torch.backends.cuda. kael has no CUDA backend in a
CPU-only build; the switches hold what is assigned with torch's defaults and change nothing."""
from __future__ import annotations

import contextlib as _contextlib
import warnings as _warnings

from kael import _global_flags
from kael.backends._flag import check_bool as _check_bool

__all__ = ["cuBLASModule", "cudnn_sdp_enabled", "enable_cudnn_sdp", "enable_flash_sdp", "enable_math_sdp",
           "enable_mem_efficient_sdp", "flash_sdp_enabled", "is_built", "math_sdp_enabled", "matmul",
           "mem_efficient_sdp_enabled", "sdp_kernel"]


def is_built() -> bool:
    """Whether kael was built with CUDA (not necessarily with a device to run on)."""
    from kael import cuda

    return cuda.is_available()


class cuBLASModule:
    """kael.backends.cuda.matmul: allow_tf32 (float32 products may use TF32: the same switch as
    kael.set_float32_matmul_precision, True for any precision but 'highest'),
    allow_fp16_reduced_precision_reduction and allow_bf16_reduced_precision_reduction."""

    def __init__(self) -> None:
        object.__setattr__(self, "_reduced", {"allow_fp16_reduced_precision_reduction": True,
                                              "allow_bf16_reduced_precision_reduction": True})

    def __getattr__(self, name: str):
        if name == "allow_tf32":
            return _global_flags.get_float32_matmul_precision() != "highest"
        if name in self._reduced:
            return self._reduced[name]
        raise AttributeError(f"Unknown attribute {name}")

    def __setattr__(self, name: str, value) -> None:
        if name == "allow_tf32":
            _check_bool("backends.cuda.matmul.allow_tf32", value)
            _global_flags._state["precision"] = "high" if value else "highest"
            return
        if name in self._reduced:
            if not isinstance(value, bool):
                raise TypeError(f"{name} expects a bool or a tuple/list of bools, but got {type(value)}")
            self._reduced[name] = value
            return
        raise AttributeError(f"Unknown attribute {name}")


matmul = cuBLASModule()

# scaled_dot_product_attention's backends: all enabled, as torch's defaults
_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def _enable(kind: str, enabled: bool) -> None:
    _sdp[kind] = _check_bool(f"backends.cuda.enable_{kind}_sdp", enabled)


def flash_sdp_enabled() -> bool:
    return _sdp["flash"]


def enable_flash_sdp(enabled: bool) -> None:
    _enable("flash", enabled)


def mem_efficient_sdp_enabled() -> bool:
    return _sdp["mem_efficient"]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    _enable("mem_efficient", enabled)


def math_sdp_enabled() -> bool:
    return _sdp["math"]


def enable_math_sdp(enabled: bool) -> None:
    _enable("math", enabled)


def cudnn_sdp_enabled() -> bool:
    return _sdp["cudnn"]


def enable_cudnn_sdp(enabled: bool) -> None:
    _enable("cudnn", enabled)


@_contextlib.contextmanager
def sdp_kernel(enable_flash: bool = True, enable_math: bool = True, enable_mem_efficient: bool = True,
               enable_cudnn: bool = True):
    """Deprecated (FutureWarning, as torch's): sets the attention backends for the block and
    restores them after."""
    _warnings.warn("`kael.backends.cuda.sdp_kernel()` is deprecated. In the future, this context manager will be "
                   "removed. Use the enable_*_sdp functions of kael.backends.cuda instead.", FutureWarning, stacklevel=3)
    saved = dict(_sdp)
    try:
        for kind, value in (("flash", enable_flash), ("math", enable_math), ("mem_efficient", enable_mem_efficient),
                            ("cudnn", enable_cudnn)):
            _enable(kind, value)
        yield {}
    finally:
        _sdp.update(saved)
