"""DLPack interop: kael.from_dlpack and Tensor.__dlpack__/__dlpack_device__ (the capsule checks
that keep a foreign producer's lies from reaching memory; NumPy's DLPack import reads the rest)."""
from __future__ import annotations

import ctypes as _ctypes
import operator as _operator

from kael._C import Tensor
from kael._tensor import _TYPESTR, _from_numpy, _numpy, _numpy_view, _requires_grad

_DL_CPU, _DL_CUDA = 1, 2


def _tensor_dlpack_device(self):
    d = self.device
    return (_DL_CUDA, d.index or 0) if d.type == "cuda" else (_DL_CPU, 0)


def _tensor_dlpack(self, stream=None, *, max_version=None, dl_device=None, copy=None):
    """The DLPack capsule of the tensor's memory (versioned when max_version >= (1, 0) asks for
    it); the capsule keeps the storage alive."""
    if self.device.type != "cpu":
        raise BufferError(f"__dlpack__: kael exports CPU tensors only (got {self.device})")
    if dl_device is not None and tuple(dl_device) != (_DL_CPU, 0):
        raise BufferError(f"__dlpack__: cannot export to device {tuple(dl_device)} from the cpu")
    if _requires_grad(self):
        raise BufferError("__dlpack__: cannot export a tensor that requires grad; call .detach() first")
    if self.dtype not in _TYPESTR:
        raise BufferError(f"__dlpack__: {self.dtype} is not exported through DLPack by kael")
    array = _numpy_view(self)
    kwargs = {"stream": stream}
    if max_version is not None:
        kwargs["max_version"] = max_version
    if dl_device is not None:
        kwargs["dl_device"] = dl_device
    if copy is not None:
        kwargs["copy"] = copy
    return array.__dlpack__(**kwargs)


class _CapsuleExporter:
    """Gives a bare DLPack capsule (torch.utils.dlpack.to_dlpack) the __dlpack__ protocol."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack__(self, *args, **kwargs):
        return self._capsule

    def __dlpack_device__(self):
        return (_DL_CPU, 0)


# The DLPack structures (dlpack.h, v1.x), read to check a capsule before NumPy trusts it.
class _DLDevice(_ctypes.Structure):
    _fields_ = [("device_type", _ctypes.c_int32), ("device_id", _ctypes.c_int32)]


class _DLDataType(_ctypes.Structure):
    _fields_ = [("code", _ctypes.c_uint8), ("bits", _ctypes.c_uint8), ("lanes", _ctypes.c_uint16)]


class _DLTensor(_ctypes.Structure):
    _fields_ = [("data", _ctypes.c_void_p), ("device", _DLDevice), ("ndim", _ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", _ctypes.POINTER(_ctypes.c_int64)),
                ("strides", _ctypes.POINTER(_ctypes.c_int64)), ("byte_offset", _ctypes.c_uint64)]


class _DLManagedTensor(_ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", _ctypes.c_void_p), ("deleter", _ctypes.c_void_p)]


class _DLManagedTensorVersioned(_ctypes.Structure):
    _fields_ = [("major", _ctypes.c_uint32), ("minor", _ctypes.c_uint32), ("manager_ctx", _ctypes.c_void_p),
                ("deleter", _ctypes.c_void_p), ("flags", _ctypes.c_uint64), ("dl_tensor", _DLTensor)]


# (type code, bits) of the DLPack dtypes kael imports: int, uint8, float, bfloat16, bool
_DL_DTYPES = {(0, 8), (0, 16), (0, 32), (0, 64), (1, 8), (2, 16), (2, 32), (2, 64), (4, 16), (6, 8)}


def _capsule_pointer(capsule, name: bytes) -> int:
    api = _ctypes.pythonapi
    api.PyCapsule_IsValid.restype = _ctypes.c_int
    api.PyCapsule_IsValid.argtypes = [_ctypes.py_object, _ctypes.c_char_p]
    if not api.PyCapsule_IsValid(capsule, name):
        return 0
    api.PyCapsule_GetPointer.restype = _ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [_ctypes.py_object, _ctypes.c_char_p]
    return api.PyCapsule_GetPointer(capsule, name) or 0


def _check_dlpack_capsule(capsule) -> None:
    """BufferError unless capsule is an unconsumed DLPack capsule whose metadata kael can import
    (CPU, at most 64 dims, non-negative sizes, a supported dtype with one lane, data for a
    non-empty tensor). The memory extent the producer claims cannot be checked: a producer
    that lies about it lies to every consumer."""
    if type(capsule).__name__ != "PyCapsule":
        raise TypeError(f"from_dlpack: __dlpack__() must return a DLPack capsule, got {type(capsule).__name__}")
    address = _capsule_pointer(capsule, b"dltensor_versioned")
    if address:
        managed = _DLManagedTensorVersioned.from_address(address)
        if managed.major != 1:
            raise BufferError(f"from_dlpack: unsupported DLPack version {managed.major}.{managed.minor}")
        dl = managed.dl_tensor
    else:
        address = _capsule_pointer(capsule, b"dltensor")
        if not address:
            raise BufferError("from_dlpack: the capsule is not an unconsumed DLPack capsule (a capsule can be "
                              "imported once)")
        dl = _DLManagedTensor.from_address(address).dl_tensor
    if dl.device.device_type != _DL_CPU:
        raise BufferError(f"from_dlpack: kael imports CPU memory only (the capsule's device type is "
                          f"{dl.device.device_type})")
    if not 0 <= dl.ndim <= 64:
        raise BufferError(f"from_dlpack: the capsule's ndim {dl.ndim} is not between 0 and 64")
    code, bits, lanes = dl.dtype.code, dl.dtype.bits, dl.dtype.lanes
    if (code, bits) not in _DL_DTYPES or lanes != 1:
        raise BufferError(f"from_dlpack: unsupported DLPack dtype (code {code}, bits {bits}, lanes {lanes})")
    if dl.ndim and not dl.shape:
        raise BufferError(f"from_dlpack: the capsule has {dl.ndim} dims and no shape")
    numel = 1
    for i in range(dl.ndim):
        size = dl.shape[i]
        if size < 0:
            raise BufferError(f"from_dlpack: the capsule's shape has a negative size {size} (dim {i})")
        numel *= size
    if numel * (bits // 8) >= 2 ** 63:
        raise BufferError(f"from_dlpack: the capsule's shape {[dl.shape[i] for i in range(dl.ndim)]} is too large")
    if numel and not dl.data:
        raise BufferError("from_dlpack: the capsule has elements and no data pointer")


def _call_dlpack(producer):
    """The producer's capsule, asked for as NumPy asks (versioned first, then the old call)."""
    try:
        return producer.__dlpack__(stream=None, max_version=(1, 0))
    except TypeError:
        return producer.__dlpack__(stream=None)


def from_dlpack(ext_tensor) -> Tensor:
    """A tensor sharing the memory of any DLPack producer (an object with __dlpack__, such as a
    PyTorch tensor or a NumPy array, or a DLPack capsule); CPU memory only."""
    if isinstance(ext_tensor, Tensor):
        return ext_tensor
    np = _numpy()
    # NumPy marks an array from an unversioned capsule read-only, as that format cannot say
    # whether the memory is; the producer of a bare capsule (to_dlpack) hands it over writable
    capsule = type(ext_tensor).__name__ == "PyCapsule"
    if capsule:
        ext_tensor = _CapsuleExporter(ext_tensor)
    if not hasattr(ext_tensor, "__dlpack__"):
        raise TypeError(f"from_dlpack: expected an object with __dlpack__ or a DLPack capsule, got "
                        f"{type(ext_tensor).__name__}")
    if hasattr(ext_tensor, "__dlpack_device__"):
        device = ext_tensor.__dlpack_device__()
        if not isinstance(device, tuple) or len(device) != 2:
            raise TypeError(f"from_dlpack: __dlpack_device__() must return a (device type, id) tuple, got "
                            f"{device!r}")
        device_type, device_id = device
        if _operator.index(device_type) != _DL_CPU:
            raise BufferError(f"from_dlpack: kael imports CPU memory only (got DLPack device type "
                              f"{int(device_type)}, id {device_id})")
    # the capsule is asked for once, checked, and handed to NumPy as it is
    dlpack_capsule = _call_dlpack(ext_tensor)
    _check_dlpack_capsule(dlpack_capsule)
    return _from_numpy(np.from_dlpack(_CapsuleExporter(dlpack_capsule)), copy_read_only=not capsule)
