"""The legacy tensor types of torch's first API: kael.FloatTensor, kael.LongTensor, ... (and their
kael.cuda twins), as torch keeps them.

Each is a class of the metaclass `tensortype`, not a subclass of kael.Tensor: calling one builds
an ordinary kael.Tensor of its dtype, `isinstance(t, kael.FloatTensor)` asks whether t is a
float32 tensor on its device type, and `t.type(kael.LongTensor)` converts. The constructor reads
its arguments as torch's legacy constructor does:

    FloatTensor()                 an empty tensor, size (0,)
    FloatTensor(2, 3)             uninitialised, of that size (also FloatTensor(kael.Size([2, 3])))
    FloatTensor([1, 2]), ((1, 2)) a copy of the data (lists, tuples, NumPy arrays)
    FloatTensor(t)                t itself under a new tensor object (same storage and autograd
                                  history); t must have the type's dtype
    device=...                    only the type's own device type
"""
from __future__ import annotations

import builtins as _builtins

from kael import _C
from kael._C import Tensor

# (tensortype stays here: torch does not export its metaclass either)
__all__ = ["BFloat16Tensor", "BoolTensor", "ByteTensor", "CharTensor", "DoubleTensor", "FloatTensor", "HalfTensor",
           "IntTensor", "LongTensor", "ShortTensor", "set_default_tensor_type"]

_TYPES = (("FloatTensor", _C.float32), ("DoubleTensor", _C.float64), ("HalfTensor", _C.float16),
          ("BFloat16Tensor", _C.bfloat16), ("ByteTensor", _C.uint8), ("CharTensor", _C.int8),
          ("ShortTensor", _C.int16), ("IntTensor", _C.int32), ("LongTensor", _C.int64), ("BoolTensor", _C.bool))


class tensortype(type):
    """The metaclass of the legacy tensor types: their instances are kael.Tensor objects of the
    type's dtype and device type."""

    dtype: object
    _device_type: str

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype and obj.device.type == cls._device_type

    def __call__(cls, *args, **kwargs):
        return _construct(cls, args, kwargs)

    @property
    def is_cuda(cls) -> bool:
        return cls._device_type == "cuda"

    @property
    def is_sparse(cls) -> bool:
        return False


def _full_name(cls) -> str:
    return f"{cls.__module__}.{cls.__name__}"


def _construct(cls, args: tuple, kwargs: dict) -> Tensor:
    import kael

    name = _full_name(cls)
    for key in kwargs:
        if key != "device":
            raise TypeError(f"{name}(): '{key}' is an invalid keyword argument (only device= is accepted)")
    device = kwargs.get("device")
    if device is not None:
        device = kael.device(device)
        if device.type != cls._device_type:
            raise RuntimeError(f"{name}(): legacy constructor expects device type: {cls._device_type} but device "
                               f"type: {device.type} was passed")
    if cls._device_type == "cuda" and not kael.cuda.is_available():
        raise TypeError(f"type {name} not available. kael not compiled with CUDA enabled.")
    options = {"dtype": cls.dtype, "device": device if device is not None else cls._device_type}
    if not args:
        return kael.empty(0, **options)
    if len(args) == 1:
        (arg,) = args
        if isinstance(arg, Tensor):
            if arg.dtype != cls.dtype or arg.device.type != cls._device_type:
                raise TypeError(f"{name}(): expected a tensor of dtype {cls.dtype} on {cls._device_type} "
                                f"(got dtype {arg.dtype} on {arg.device.type})")
            return arg.view_as(arg)
        if isinstance(arg, kael.Size) or (isinstance(arg, int) and not isinstance(arg, _builtins.bool)):
            return kael.empty(arg, **options)
        if isinstance(arg, str):
            raise TypeError(f"{name}(): invalid data type 'str'")
        if isinstance(arg, (_builtins.bool, int, float, complex)):
            raise TypeError(f"{name}(): data must be a sequence (got {type(arg).__name__})")
        return kael.tensor(arg, **options)
    for pos, size in enumerate(args):
        if isinstance(size, _builtins.bool) or not isinstance(size, int):
            raise TypeError(f"{name}(): argument 'size' must be a tuple of ints, but got {type(size).__name__} "
                            f"at pos {pos + 1}")
    return kael.empty(args, **options)


def _make(name: str, dtype, device_type: str, module: str):
    cls = tensortype(name, (), {"dtype": dtype, "_device_type": device_type, "__module__": module,
                                "__doc__": f"The legacy type of {dtype} tensors on {device_type} (see kael._legacy)."})
    return cls


for _name, _dtype in _TYPES:
    globals()[_name] = _make(_name, _dtype, "cpu", "kael")
# the kael.cuda ones: isinstance is False and construction raises TypeError without CUDA
CUDA_TYPES = {_name: _make(_name, _dtype, "cuda", "kael.cuda") for _name, _dtype in _TYPES}
BY_NAME = {f"kael.{_name}": globals()[_name] for _name, _ in _TYPES} | {
    f"kael.cuda.{_name}": cls for _name, cls in CUDA_TYPES.items()}
del _name, _dtype


_warned_default_tensor_type = False


def _import_dotted(name: str):
    parts = name.split(".")
    obj = __import__(parts[0])
    for i, part in enumerate(parts[1:], 1):
        if not hasattr(obj, part):
            __import__(".".join(parts[:i + 1]))
        obj = getattr(obj, part)
    return obj


def set_default_tensor_type(t) -> None:
    """Deprecated (a UserWarning, once per process, as torch's): the default floating dtype set
    from a legacy type or its name (kael.DoubleTensor, 'kael.DoubleTensor'); prefer
    kael.set_default_dtype."""
    import warnings

    import kael

    global _warned_default_tensor_type
    if not _warned_default_tensor_type:
        _warned_default_tensor_type = True
        warnings.warn("kael.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                      "kael.set_default_dtype() instead.", UserWarning, stacklevel=2)
    if isinstance(t, str):
        t = BY_NAME[t] if t in BY_NAME else _import_dotted(t)
    if not isinstance(t, tensortype):
        raise TypeError("set_default_tensor_type: invalid type object: only floating-point types are supported as "
                        "the default type")
    if t._device_type == "cuda" and not kael.cuda.is_available():
        raise TypeError(f"type {_full_name(t)} not available. kael not compiled with CUDA enabled.")
    if not t.dtype.is_floating_point:
        raise TypeError("set_default_tensor_type: only floating-point types are supported as the default type")
    kael.set_default_dtype(t.dtype)
