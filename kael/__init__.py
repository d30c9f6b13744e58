"""kael: a PyTorch-style tensor library with a C++20 core.

>>> import kael
>>> a = kael.ones(2, 3)
>>> (a + 1).sum().item()
12.0
"""
from __future__ import annotations

import builtins as _builtins
import ctypes as _ctypes
import os as _os
import sys as _sys


def _preload_onednn() -> None:
    # libdnnl.so.3 comes from the onednn-cpu-gomp wheel, installed into <prefix>/lib of the
    # environment; load it by path so the extension finds it however kael was installed.
    for prefix in (_sys.prefix, _sys.base_prefix):
        path = _os.path.join(prefix, "lib", "libdnnl.so.3")
        if _os.path.exists(path):
            _ctypes.CDLL(path, mode=_ctypes.RTLD_GLOBAL)
            return


_preload_onednn()

from kael import _C  # noqa: E402
from kael._C import *  # noqa: E402,F401,F403
from kael._C import Tensor, dtype  # noqa: E402,F401

# The dtypes (kael.float32, kael.half, kael.int, kael.bool, ...) come from _C, which registers
# every name codegen/enums.py gives them; some shadow builtins inside this module, as in torch.

__version__ = _C.__version__


def is_tensor(obj: object) -> _builtins.bool:
    """Whether obj is a kael tensor (or an instance of a Tensor subclass)."""
    return isinstance(obj, Tensor)

from kael import random  # noqa: E402
from kael.random import get_rng_state, initial_seed, manual_seed, seed, set_rng_state  # noqa: E402
from kael import nn  # noqa: E402

__all__ = [name for name in dir(_C) if not name.startswith("_")] + ["is_tensor"] + random.__all__
