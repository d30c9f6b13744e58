"""kael.backends.cudnn: NVIDIA's cuDNN, which kael does not use. The flags hold what is assigned
(bools only) with torch's defaults; is_available() is False and version() None."""
import contextlib as _contextlib

from kael.backends._flag import flag_module as _flag_module

__all__ = ["flags", "is_acceptable", "is_available", "version"]


def version():
    """cuDNN's version (None: kael has no cuDNN)."""
    return None


def is_available() -> bool:
    """Whether cuDNN can be used (never)."""
    return False


def is_acceptable(tensor) -> bool:
    """Whether cuDNN would take this tensor (never: it only takes CUDA tensors, with cuDNN)."""
    return False


@_contextlib.contextmanager
def flags(enabled: bool = False, benchmark: bool = False, benchmark_limit: int = 10, deterministic: bool = False,
          allow_tf32: bool = True):
    """Sets the flags for the block and restores them after (benchmark_limit is cuDNN's own
    setting, taken only where cuDNN exists, as in torch)."""
    import sys

    module = sys.modules[__name__]
    names = ("enabled", "benchmark", "deterministic", "allow_tf32")
    saved = {name: getattr(module, name) for name in names}
    values = (enabled, benchmark, deterministic, allow_tf32)
    for name, value in zip(names, values):
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


benchmark_limit = None  # cuDNN's algorithm search limit: None without cuDNN, as in torch
_flag_module(__name__, {"enabled": True, "benchmark": False, "deterministic": False, "allow_tf32": True})
