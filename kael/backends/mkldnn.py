"""kael.backends.mkldnn: oneDNN (formerly MKL-DNN), which kael's CPU products and convolutions run on."""
import contextlib as _contextlib

from kael.backends._flag import flag_module as _flag_module

__all__ = ["flags", "is_available"]


def is_available() -> bool:
    """Whether kael was built with oneDNN (always: its CPU kernels use it)."""
    return True


@_contextlib.contextmanager
def flags(enabled: bool = False, deterministic: bool = False):
    """Sets the flags for the block and restores them after."""
    import sys

    module = sys.modules[__name__]
    saved = (module.enabled, module.deterministic)
    module.enabled, module.deterministic = enabled, deterministic
    try:
        yield
    finally:
        module.enabled, module.deterministic = saved


_flag_module(__name__, {"enabled": True, "deterministic": False})
