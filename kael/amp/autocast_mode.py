"""kael.autocast: regions where ops run in an op-specific dtype (torch.autocast).

The state is per thread and lives in the C++ core (Note [Autocast] in kael/autocast/autocast.h):
while autocast is on, the Autocast dispatch key casts the arguments of the ops of its table (the
matmuls, linear and attention to the autocast dtype; losses and numerically sensitive ops to
float32; cat and stack to their widest dtype) and every other op runs untouched. This module is
the Python face: the context manager and decorator, the thread's state functions
(kael.is_autocast_enabled, ...) and the helpers for custom autograd Functions. See
docs/decisions/autocast.md.
"""
from __future__ import annotations

import collections.abc
import functools
import warnings
from typing import Any

import kael
from kael import _C

__all__ = ["autocast_decorator", "autocast", "is_autocast_available", "custom_fwd", "custom_bwd"]

# The public state functions (exported from kael as torch exports them from torch).
STATE_FUNCTIONS = ["is_autocast_enabled", "set_autocast_enabled", "get_autocast_dtype", "set_autocast_dtype",
                   "is_autocast_cache_enabled", "set_autocast_cache_enabled", "clear_autocast_cache",
                   "autocast_increment_nesting", "autocast_decrement_nesting", "is_autocast_cpu_enabled",
                   "set_autocast_cpu_enabled", "get_autocast_cpu_dtype", "set_autocast_cpu_dtype",
                   "get_autocast_gpu_dtype", "set_autocast_gpu_dtype"]

_DEVICE_INDEX = {"cpu": 0, "cuda": 1}


def _device_type(device_type: Any) -> str:
    """The device type a `device_type` string names ('cpu', 'cuda'); kael.device's RuntimeError
    for a string that names none."""
    if not isinstance(device_type, str):
        raise TypeError(f"autocast: expected a device type string such as 'cpu', got {type(device_type).__name__}")
    return kael.device(device_type).type


def _index(device_type: Any) -> int:
    return _DEVICE_INDEX[_device_type(device_type)]


def _check_bool(fn: str, name: str, position: int, value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{fn}(): argument '{name}' (position {position}) must be bool, not {type(value).__name__}")


def is_autocast_available(device_type: str) -> bool:
    """Whether autocast can run on the device type: True for 'cpu' and 'cuda' (with CUDA
    absent, kael.autocast('cuda') then warns and disables itself, as torch does)."""
    return _device_type(device_type) in _DEVICE_INDEX


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on for the device type on this thread ('cuda' when not given, as
    torch's legacy form)."""
    return _C._autocast_is_enabled(_index("cuda" if device_type is None else device_type))


def set_autocast_enabled(device_type: Any, enabled: Any = None) -> None:
    """Turns autocast on or off for the device type on this thread; set_autocast_enabled(bool)
    is torch's legacy form for CUDA."""
    if enabled is None:
        _check_bool("set_autocast_enabled", "enabled", 1, device_type)
        device_type, enabled = "cuda", device_type
    _check_bool("set_autocast_enabled", "enabled", 2, enabled)
    _C._autocast_set_enabled(_index(device_type), enabled)


def get_autocast_dtype(device_type: str) -> kael.dtype:
    """The dtype lower-precision ops run in under the device type's autocast (bfloat16 for the
    CPU, float16 for CUDA unless set)."""
    return _C._autocast_get_dtype(_index(device_type))


def set_autocast_dtype(device_type: str, dtype: kael.dtype) -> None:
    """Sets the device type's autocast dtype on this thread."""
    _C._autocast_set_dtype(_index(device_type), dtype)


def is_autocast_cache_enabled() -> bool:
    """Whether the weight cast cache is on (this thread)."""
    return _C._autocast_is_cache_enabled()


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Turns the weight cast cache on or off (this thread)."""
    _check_bool("set_autocast_cache_enabled", "enabled", 1, enabled)
    _C._autocast_set_cache_enabled(enabled)


def clear_autocast_cache() -> None:
    """Drops the weight casts cached on this thread."""
    _C._autocast_clear_cache()


def autocast_increment_nesting() -> int:
    """Counts an entered autocast context; returns the depth."""
    return _C._autocast_increment_nesting()


def autocast_decrement_nesting() -> int:
    """Counts a left autocast context; returns the depth (the cache is cleared at 0)."""
    return _C._autocast_decrement_nesting()


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"kael.{old}() is deprecated. Please use kael.{new} instead.", DeprecationWarning, stacklevel=3)


def is_autocast_cpu_enabled() -> bool:
    """Deprecated: is_autocast_enabled('cpu')."""
    _deprecated("is_autocast_cpu_enabled", "is_autocast_enabled('cpu')")
    return is_autocast_enabled("cpu")


def set_autocast_cpu_enabled(enabled: bool) -> None:
    """Deprecated: set_autocast_enabled('cpu', enabled)."""
    _deprecated("set_autocast_cpu_enabled", "set_autocast_enabled('cpu', enabled)")
    set_autocast_enabled("cpu", enabled)


def get_autocast_cpu_dtype() -> kael.dtype:
    """Deprecated: get_autocast_dtype('cpu')."""
    _deprecated("get_autocast_cpu_dtype", "get_autocast_dtype('cpu')")
    return get_autocast_dtype("cpu")


def set_autocast_cpu_dtype(dtype: kael.dtype) -> None:
    """Deprecated: set_autocast_dtype('cpu', dtype)."""
    _deprecated("set_autocast_cpu_dtype", "set_autocast_dtype('cpu', dtype)")
    set_autocast_dtype("cpu", dtype)


def get_autocast_gpu_dtype() -> kael.dtype:
    """Deprecated: get_autocast_dtype('cuda')."""
    _deprecated("get_autocast_gpu_dtype", "get_autocast_dtype('cuda')")
    return get_autocast_dtype("cuda")


def set_autocast_gpu_dtype(dtype: kael.dtype) -> None:
    """Deprecated: set_autocast_dtype('cuda', dtype)."""
    _deprecated("set_autocast_gpu_dtype", "set_autocast_dtype('cuda', dtype)")
    set_autocast_dtype("cuda", dtype)


def autocast_decorator(autocast_instance: autocast, func):
    """func run inside autocast_instance."""
    @functools.wraps(func)
    def decorate_autocast(*args, **kwargs):
        with autocast_instance:
            return func(*args, **kwargs)

    return decorate_autocast


class autocast:
    """A region where ops run in an op-specific dtype, as torch.autocast: a context manager
    or a decorator.

        with kael.autocast(device_type="cpu", dtype=kael.bfloat16):
            loss = loss_fn(model(x), y)     # matmuls in bfloat16, the loss in float32
        loss.backward()                     # gradients of float32 parameters in float32

    Args:
        device_type: 'cpu' or 'cuda'.
        dtype: the dtype of the lower-precision ops (kael.get_autocast_dtype(device_type) when
            None: bfloat16 for the CPU). Another dtype than float16 and bfloat16 warns and
            disables autocast.
        enabled: False runs the region without autocast (also inside an enabled one).
        cache_enabled: keep the lower-precision copy of each float32 leaf that requires grad
            (a weight) until the outermost context exits (kael.is_autocast_cache_enabled()
            when None).

    The state is per thread: another thread starts without autocast.
    """

    def __init__(self, device_type: str, dtype: kael.dtype | None = None, enabled: bool = True,
                 cache_enabled: bool | None = None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else dtype
        self.device = device_type
        if not is_autocast_available(self.device):
            raise RuntimeError(f"User specified an unsupported autocast device_type '{self.device}'")
        self._cache_enabled = is_autocast_cache_enabled() if cache_enabled is None else cache_enabled
        supported = [kael.bfloat16, kael.float16]
        if enabled:
            if self.device == "cuda":
                if not kael.cuda.is_available():
                    warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.", stacklevel=2)
                    enabled = False
            elif self.fast_dtype not in supported:
                name = self.device.upper()
                warnings.warn(f"In {name} autocast, but the target dtype is not supported. Disabling autocast.\n"
                              f"{name} Autocast only supports dtypes of "
                              + ", ".join(map(str, supported)) + " currently.", stacklevel=2)
                enabled = False
        self._enabled = enabled

    def __enter__(self):
        self.prev_cache_enabled = is_autocast_cache_enabled()
        self.prev = is_autocast_enabled(self.device)
        self.prev_fastdtype = get_autocast_dtype(self.device)
        set_autocast_enabled(self.device, bool(self._enabled))
        set_autocast_dtype(self.device, self.fast_dtype)
        autocast_increment_nesting()
        set_autocast_cache_enabled(bool(self._cache_enabled))
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> bool:
        if autocast_decrement_nesting() == 0:
            clear_autocast_cache()
        set_autocast_enabled(self.device, self.prev)
        set_autocast_dtype(self.device, self.prev_fastdtype)
        set_autocast_cache_enabled(self.prev_cache_enabled)
        return False

    def __call__(self, func):
        if not callable(func):
            raise TypeError(
                f"autocast()(func) requires a callable, but got {type(func).__name__}. "
                f"Did you mean to use autocast as a context manager? For example:\n"
                f"    with kael.autocast(device_type=...):\n"
                f"        output = model(input)")
        return autocast_decorator(self, func)


def _cast(value: Any, device_type: str, dtype: kael.dtype) -> Any:
    """value with its floating tensors of the device type (not float64) cast to dtype, through
    lists, tuples and mappings."""
    if isinstance(value, kael.Tensor):
        eligible = value.is_floating_point() and value.device.type == device_type and value.dtype != kael.float64
        return value.to(dtype) if eligible else value
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, collections.abc.Mapping):
        return {_cast(k, device_type, dtype): _cast(v, device_type, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, device_type, dtype) for v in value)
    return value


def custom_fwd(fwd=None, *, device_type: str, cast_inputs: kael.dtype | None = None):
    """Decorator of a custom autograd Function's forward (torch.amp.custom_fwd). With
    cast_inputs inside an enabled autocast region, the floating tensor arguments are cast to it
    and forward runs with autocast off; otherwise forward runs in the current state."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        args[0]._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            args[0]._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        in_autocast = is_autocast_enabled(device_type)
        args[0]._fwd_used_autocast = False
        if not in_autocast:
            return fwd(*args, **kwargs)
        with autocast(device_type=device_type, enabled=False):
            return fwd(*_cast(args, device_type, cast_inputs), **_cast(kwargs, device_type, cast_inputs))

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type: str):
    """Decorator of a custom autograd Function's backward (torch.amp.custom_bwd): backward
    runs in the autocast state its forward ran in."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        with autocast(device_type=device_type, enabled=args[0]._fwd_used_autocast, dtype=args[0]._dtype):
            return bwd(*args, **kwargs)

    return decorate_bwd


# ---- composites written in Python
# PyTorch's CPU lists name ops that kael writes in Python (kael/_composites.py,
# kael/nn/functional.py) rather than in the registry, where the Autocast key cannot see them.
# wrap_python_composites() gives each the autocast kernel's behaviour: with CPU autocast on,
# its floating tensor arguments are cast by the op's policy (kael._C._autocast_cast, the
# same cast and weight cache as the C++ kernel) and its body runs with autocast off, as the
# body of a registry op runs below the key. The Tensor methods of the kael ones are wrapped too.
_LOWER, _FP32 = 0, 1
PYTHON_COMPOSITES = {
    "kael": {},
    "kael.nn.functional": {
        "prelu": _LOWER, "cross_entropy": _FP32, "mse_loss": _FP32, "l1_loss": _FP32, "nll_loss": _FP32,
        "smooth_l1_loss": _FP32, "huber_loss": _FP32, "kl_div": _FP32, "binary_cross_entropy": _FP32,
        "binary_cross_entropy_with_logits": _FP32, "margin_ranking_loss": _FP32, "soft_margin_loss": _FP32,
        "poisson_nll_loss": _FP32, "cosine_embedding_loss": _FP32, "hinge_embedding_loss": _FP32,
        "triplet_margin_loss": _FP32, "multi_margin_loss": _FP32, "multilabel_margin_loss": _FP32,
        "ctc_loss": _FP32, "avg_pool3d": _FP32, "max_pool3d": _FP32, "adaptive_avg_pool3d": _FP32,
        "adaptive_max_pool3d": _FP32, "grid_sample": _FP32},
}


def _autocast_python(fn, policy: int):
    tensor_type = kael.Tensor

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not _C._autocast_is_enabled(0):
            return fn(*args, **kwargs)
        to = kael.float32 if policy == _FP32 else _C._autocast_get_dtype(0)
        args = tuple(_C._autocast_cast(a, 0, to) if isinstance(a, tensor_type) else a for a in args)
        kwargs = {k: _C._autocast_cast(v, 0, to) if isinstance(v, tensor_type) else v for k, v in kwargs.items()}
        _C._autocast_set_enabled(0, False)
        try:
            return fn(*args, **kwargs)
        finally:
            _C._autocast_set_enabled(0, True)

    wrapper.__kael_autocast__ = policy
    return wrapper


def wrap_python_composites() -> None:
    """Wraps the composites of PYTHON_COMPOSITES in their modules (once; kael/__init__.py calls it)."""
    import importlib

    if not hasattr(_C, "_autocast_cast"):  # a _C built before autocast (a stale build)
        return
    from kael import _composites, _tensor

    for module_name, names in PYTHON_COMPOSITES.items():
        module = importlib.import_module(module_name)
        for name, policy in names.items():
            fn = getattr(module, name, None)
            if fn is None or hasattr(fn, "__kael_autocast__"):
                continue
            wrapped = _autocast_python(fn, policy)
            setattr(module, name, wrapped)
            if module is kael and getattr(_composites, name, None) is fn:
                # the composites module's own callers (x.mm(y) calls its mm) and the Tensor method
                setattr(_composites, name, wrapped)
                if name in _composites.METHODS and name != "mm":
                    _tensor._extend({name: wrapped})
