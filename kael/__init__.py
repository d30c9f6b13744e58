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


# oneDNN runs on GNU OpenMP, whose idle threads spin (by default for up to ~300,000 rounds)
# after each parallel region: on few cores they then take the CPU from kael's own pool threads
# and from other work (docs/decisions.md, "Training step speed"). Unless the user chose a
# policy, OpenMP loads with OMP_WAIT_POLICY=PASSIVE (idle threads sleep); the variable is
# removed again once loaded, so libraries loaded later (torch's own OpenMP) keep their default.
_passive_openmp = "OMP_WAIT_POLICY" not in _os.environ
if _passive_openmp:
    _os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
try:
    _preload_onednn()
    from kael import _C  # noqa: E402
finally:
    if _passive_openmp:
        del _os.environ["OMP_WAIT_POLICY"]
from kael._C import *  # noqa: E402,F401,F403
from kael._C import Tensor, dtype  # noqa: E402,F401

# The dtypes (kael.float32, kael.half, kael.int, kael.bool, ...) come from _C, which registers
# every name codegen/enums.py gives them; some shadow builtins inside this module, as in torch.

from kael.version import __version__  # noqa: E402  (one place: kael/version.py)
from kael import __config__  # noqa: E402,F401  (kael.__config__.show(), as torch's)

# The named tuples of ops with several results (kael.max(t, dim) -> kael.return_types.max), as
# torch.return_types; registered as a module so that pickle finds the types by name.
return_types = _C.return_types
_sys.modules[__name__ + ".return_types"] = return_types


def is_tensor(obj: object) -> _builtins.bool:
    """Whether obj is a kael tensor (or an instance of a Tensor subclass)."""
    return isinstance(obj, Tensor)

# Ops that torch offers only in torch.nn.functional are bound in _C but not exported here.
_FUNCTIONAL_ONLY = ("gelu", "silu", "softplus", "one_hot")
for _name in _FUNCTIONAL_ONLY:
    globals().pop(_name, None)

from kael import random  # noqa: E402
from kael.random import get_rng_state, initial_seed, manual_seed, seed, set_rng_state  # noqa: E402

# kael.device, kael.Size, NumPy and DLPack interop, as_tensor/asarray, and the Python-level
# Tensor methods (kael/_tensor.py adds them to kael.Tensor when imported).
from kael import _tensor  # noqa: E402
from kael._tensor import UntypedStorage, as_tensor, asarray, device, from_dlpack, from_numpy  # noqa: E402
from kael import _composites  # noqa: E402
_composite_names = _composites.install(globals(), _tensor._extend)  # aliases and Python-level composites
from kael import _memory_format  # noqa: E402  (kael.channels_last & co., memory_format= arguments)
_tensor._extend(_memory_format.METHODS); globals().update(_memory_format.FUNCTIONS)  # noqa: E702
from kael._memory_format import channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format  # noqa: E402,F401,E501
_composite_names = _composite_names + _memory_format.NAMES
from kael import cuda  # noqa: E402
from kael import accelerator  # noqa: E402
from kael._tensor_str import set_printoptions  # noqa: E402
# torch's namespaces and legacy names (docs/decisions/namespaces.md)
from kael import _global_flags, _legacy, amp, backends  # noqa: E402
from kael._global_flags import *  # noqa: E402,F401,F403
from kael._legacy import *  # noqa: E402,F401,F403

__all__ = ([name for name in dir(_C) if not name.startswith("_") and name not in _FUNCTIONAL_ONLY]
           + ["is_tensor", "UntypedStorage", "as_tensor", "asarray", "device", "from_dlpack", "from_numpy", "cuda", "accelerator",
              "set_printoptions", "amp", "backends"]
           + random.__all__ + _composite_names + _global_flags.__all__ + _legacy.__all__)

from kael import nn  # noqa: E402,F401  (after the names above: kael.nn imports from kael)
from kael.functional import nonzero, tensordot, unique, unique_consecutive  # noqa: E402,F401

# ---- autograd
from kael import autograd  # noqa: E402
from kael.autograd.grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled  # noqa: E402,F401

__all__ += ["autograd", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode"]

# ---- autocast (kael/amp/autocast_mode.py; kael.cpu.amp and kael.cuda.amp hold torch's deprecated spellings)
from kael.amp import autocast_mode as _autocast_mode  # noqa: E402
from kael.amp.autocast_mode import autocast  # noqa: E402,F401
globals().update({_name: getattr(_autocast_mode, _name) for _name in _autocast_mode.STATE_FUNCTIONS})
_autocast_mode.wrap_python_composites()  # PyTorch's autocast ops that kael writes in Python
from kael import cpu  # noqa: E402,F401

__all__ += ["autocast", "cpu"] + _autocast_mode.STATE_FUNCTIONS

# ---- optim and data (pure Python; kael.nn is imported above)
from kael import data, optim  # noqa: E402,F401
from kael.utils import data as _utils_data  # noqa: E402  (torch.utils.data's path: kael.data's objects)
from kael.serialization import load, save  # noqa: E402,F401

# ---- models (kael.nn modules whose compute is C++)
from kael import models  # noqa: E402,F401
from kael.models import GPT, GPTConfig  # noqa: E402,F401

__all__ += ["GPT", "GPTConfig"]

from kael.functional import __all__ as _functional_all  # noqa: E402

__all__ += [name for name in _functional_all if name not in __all__]
__all__ = list(dict.fromkeys(__all__ + ["nn", "random", "return_types", "data", "optim", "save", "load"]))
del annotations, _name, _functional_all, _utils_data  # `from __future__` and loop names are not API
