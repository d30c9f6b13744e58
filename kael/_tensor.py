"""The objects around a tensor that PyTorch code expects, written in Python: kael.device,
NumPy and DLPack interop, the factories as_tensor/asarray, and the Tensor methods and
properties that are orchestration rather than computation (placed on kael.Tensor by
``_C._tensor_extend``, see Note [Python-level Tensor methods] in csrc/pyobject.cpp)."""
from __future__ import annotations

import builtins as _builtins
import ctypes as _ctypes
import warnings as _warnings

from kael import _C
from kael._C import Tensor

# ---------------------------------------------------------------------------------- device


class device:
    """A device: ``kael.device("cpu")``, ``kael.device("cuda:0")``, ``kael.device("cuda", 0)``.

    ``type`` is "cpu" or "cuda", ``index`` the device index or None; a device compares equal to
    another device or to a device string naming the same device."""

    __slots__ = ("_type", "_index")

    def __init__(self, type, index=None):
        if isinstance(type, device):
            if index is not None:
                raise TypeError("device(): an index cannot be given with a device object")
            self._type, self._index = type._type, type._index
            return
        if not isinstance(type, str):
            raise TypeError(f"device(): expected a device string or a kael.device, got {_builtins.type(type).__name__}")
        parsed_type, parsed_index = _C._parse_device(type)
        if index is not None:
            if parsed_index is not None:
                raise RuntimeError(f"device(): type (string) must not include an index because index was "
                                   f"passed explicitly: {type}")
            if isinstance(index, _builtins.bool) or not isinstance(index, int):
                raise TypeError(f"device(): index must be an int, got {_builtins.type(index).__name__}")
            if index < 0:
                raise RuntimeError(f"Device index must not be negative (got {index})")
            _C._parse_device(f"{parsed_type}:{index}")
            parsed_index = index
        self._type, self._index = parsed_type, parsed_index

    @property
    def type(self) -> str:
        return self._type

    @property
    def index(self):
        return self._index

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except (RuntimeError, TypeError, ValueError):
                return False
        if not isinstance(other, device):
            return NotImplemented
        return self._type == other._type and self._index == other._index

    def __hash__(self):
        return hash((self._type, self._index))

    def __str__(self):
        return self._type if self._index is None else f"{self._type}:{self._index}"

    def __repr__(self):
        if self._index is None:
            return f"device(type='{self._type}')"
        return f"device(type='{self._type}', index={self._index})"

    def __reduce__(self):
        return (device, (self._type, self._index))


device.__module__ = "kael"
_C._register_device_class(device)

# ---------------------------------------------------------------------------------- dtypes

_DTYPES = {d: d for d in (_C.bool, _C.uint8, _C.int8, _C.int16, _C.int32, _C.int64, _C.float16, _C.bfloat16,
                          _C.float32, _C.float64)}
# Tensor.type() names, as torch's legacy tensor types
_TYPE_NAMES = {_C.float32: "FloatTensor", _C.float64: "DoubleTensor", _C.float16: "HalfTensor",
               _C.bfloat16: "BFloat16Tensor", _C.uint8: "ByteTensor", _C.int8: "CharTensor",
               _C.int16: "ShortTensor", _C.int32: "IntTensor", _C.int64: "LongTensor", _C.bool: "BoolTensor"}
_BY_TYPE_NAME = {name: d for d, name in _TYPE_NAMES.items()}
# NumPy's (kind, itemsize) of each kael dtype; bfloat16 has no NumPy dtype
_NUMPY_KINDS = {("b", 1): _C.bool, ("u", 1): _C.uint8, ("i", 1): _C.int8, ("i", 2): _C.int16, ("i", 4): _C.int32,
                ("i", 8): _C.int64, ("f", 2): _C.float16, ("f", 4): _C.float32, ("f", 8): _C.float64}
_TYPESTR = {d: ("|" if k[1] == 1 else "<") + k[0] + str(k[1]) for k, d in _NUMPY_KINDS.items()}


def _numpy():
    import numpy
    return numpy


def _requires_grad(t) -> _builtins.bool:
    return _builtins.bool(getattr(t, "requires_grad", False))


# ---------------------------------------------------------------------------------- NumPy


def from_numpy(ndarray) -> Tensor:
    """A tensor sharing the memory of a NumPy array (the array is kept alive while the tensor or
    a view of it exists). Read-only arrays are copied, because kael tensors are writable."""
    return _from_numpy(ndarray, copy_read_only=True)


def _from_numpy(ndarray, copy_read_only: _builtins.bool) -> Tensor:
    np = _numpy()
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy: expected np.ndarray (got {type(ndarray).__name__})")
    interface = ndarray.__array_interface__
    typestr = interface["typestr"]
    itemsize = ndarray.dtype.itemsize
    if typestr[0] == ">" and itemsize > 1:
        raise TypeError(f"from_numpy: arrays of non-native byte order are not supported (got dtype "
                        f"{ndarray.dtype.str}); convert with .astype('{ndarray.dtype.newbyteorder('=').str}')")
    dtype = _NUMPY_KINDS.get((ndarray.dtype.kind, itemsize)) if ndarray.dtype.fields is None else None
    if dtype is None:
        raise TypeError(f"from_numpy: can't convert np.ndarray of type numpy.{ndarray.dtype}. The only supported "
                        "types are: float64, float32, float16, int64, int32, int16, int8, uint8, and bool.")
    address, read_only = interface["data"]
    shape = ndarray.shape
    strides = []
    for s in ndarray.strides:
        if s < 0:
            raise ValueError("from_numpy: at least one stride in the given numpy array is negative, and tensors "
                             "with negative strides are not supported; call .copy() first")
        if s % itemsize:
            raise ValueError(f"from_numpy: given numpy array strides {ndarray.strides} are not a multiple of the "
                             f"element byte size ({itemsize}); call .copy() first")
        strides.append(s // itemsize)
    if ndarray.size == 0:
        nbytes = 0
    else:
        if address % itemsize:
            raise RuntimeError(f"from_numpy: the array's data at {address:#x} is not aligned to its element "
                               f"size ({itemsize} bytes); call .copy() first")
        nbytes = itemsize + _builtins.sum((n - 1) * s for n, s in zip(shape, ndarray.strides))
    tensor = _C._from_pointer(ndarray, address or 0, nbytes, dtype, shape, strides, 0)
    return tensor.clone() if read_only and copy_read_only else tensor


class _ArrayHolder:
    """The owner of a NumPy array over tensor memory: holds the storage (a capsule) alive."""

    __slots__ = ("__array_interface__", "_storage")


def _numpy_view(t: Tensor):
    np = _numpy()
    dtype = t.dtype
    if dtype not in _TYPESTR:
        raise TypeError(f"Got unsupported ScalarType {dtype}: NumPy has no {dtype}; convert with .float() first")
    if t.numel() == 0:
        return np.empty(tuple(t.shape), dtype=_TYPESTR[dtype])
    storage, base, _nbytes, _dev = _C._storage_ref(t)
    item = t.element_size()
    holder = _ArrayHolder()
    holder._storage = storage
    holder.__array_interface__ = {
        "version": 3,
        "shape": tuple(t.shape),
        "typestr": _TYPESTR[dtype],
        "data": (base + t.storage_offset() * item, False),
        "strides": tuple(s * item for s in t.stride()),
    }
    return np.asarray(holder)


def _tensor_numpy(self, *, force: _builtins.bool = False):
    """A NumPy array sharing the tensor's memory (the storage is kept alive while the array
    exists). force=True detaches and copies to the CPU first."""
    if force:
        self = self.detach().cpu()
    if self.device.type != "cpu":
        raise TypeError(f"cannot share a tensor on device {self.device} with numpy; call .cpu() first")
    if _requires_grad(self):
        raise RuntimeError("cannot share a tensor that requires grad; call .detach() first")
    return _numpy_view(self)


def _tensor_array(self, dtype=None, copy=None):
    """NumPy's __array__: the shared array (np.asarray(t) shares memory), a copy with copy=True,
    converted when dtype is given."""
    np = _numpy()
    array = self.numpy()
    if dtype is not None and np.dtype(dtype) != array.dtype:
        if copy is False:
            raise ValueError(f"__array__: converting {self.dtype} to {np.dtype(dtype)} needs a copy, and copy=False")
        return array.astype(dtype)
    return array.copy() if copy else array


# ---------------------------------------------------------------------------------- DLPack

# kael/_dlpack.py (which reads the NumPy helpers above, so it is imported here, after them)
from kael._dlpack import _tensor_dlpack, _tensor_dlpack_device, from_dlpack  # noqa: E402


# ---------------------------------------------------------------------------------- factories


def _is_numpy_array(obj) -> _builtins.bool:
    return type(obj).__module__ == "numpy" and type(obj).__name__ == "ndarray"


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """data as a tensor, sharing memory when it already is one (or a NumPy array) of the
    requested dtype and device; copies otherwise."""
    if isinstance(data, Tensor):
        return data.to(device=device if device is not None else data.device, dtype=dtype)
    if _is_numpy_array(data) and (data.dtype.kind, data.dtype.itemsize) in _NUMPY_KINDS:
        t = from_numpy(data)
        return t.to(device=device if device is not None else t.device, dtype=dtype)
    return _C.tensor(data, dtype=dtype, device=device)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad: _builtins.bool = False) -> Tensor:
    """obj as a tensor: shares memory with a tensor, NumPy array or DLPack producer when dtype
    and device allow (copy=None), always copies with copy=True, and raises ValueError when a
    copy would be needed with copy=False."""
    shared = None
    if isinstance(obj, Tensor):
        shared = obj
    elif _is_numpy_array(obj) and (obj.dtype.kind, obj.dtype.itemsize) in _NUMPY_KINDS:
        if not obj.flags.writeable and copy is False:
            raise ValueError("asarray: a read-only NumPy array cannot be shared by a (writable) tensor, and "
                             "copy=False")
        shared = from_numpy(obj)
    elif hasattr(obj, "__dlpack__"):
        shared = from_dlpack(obj)
    if shared is not None:
        result = shared.to(device=device if device is not None else shared.device, dtype=dtype)
        if copy and result is shared:
            result = shared.clone()
        elif copy is False and result is not shared:
            raise ValueError(f"asarray: converting the {shared.dtype} tensor on {shared.device} to dtype={dtype}, "
                             f"device={device} needs a copy, and copy=False")
    elif copy is False:
        raise ValueError(f"asarray: a {type(obj).__name__} cannot be shared, and copy=False")
    else:
        result = _C.tensor(obj, dtype=dtype, device=device)
    if requires_grad:
        result.requires_grad_(True)
    return result


# ---------------------------------------------------------------------------------- Tensor methods


def _size_args(size, name):
    if len(size) == 1 and not isinstance(size[0], int) and not hasattr(size[0], "__index__"):
        return size[0]
    return size


def _new_options(self, dtype, device):
    return {"dtype": self.dtype if dtype is None else dtype, "device": self.device if device is None else device}


def _finish(t, requires_grad):
    if requires_grad:
        t.requires_grad_(True)
    return t


def _new_zeros(self, *size, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    """A tensor of zeros of the given size, with this tensor's dtype and device by default."""
    return _finish(_C.zeros(_size_args(size, "new_zeros"), **_new_options(self, dtype, device)), requires_grad)


def _new_ones(self, *size, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    """A tensor of ones of the given size, with this tensor's dtype and device by default."""
    return _finish(_C.ones(_size_args(size, "new_ones"), **_new_options(self, dtype, device)), requires_grad)


def _new_empty(self, *size, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    """An uninitialised tensor of the given size, with this tensor's dtype and device by default."""
    return _finish(_C.empty(_size_args(size, "new_empty"), **_new_options(self, dtype, device)), requires_grad)


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False, layout=None,
              pin_memory=False):
    """A tensor of the given size filled with fill_value, with this tensor's dtype and device by default."""
    return _finish(_C.full(size, fill_value, **_new_options(self, dtype, device)), requires_grad)


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    """A copy of data as a tensor, with this tensor's dtype and device by default."""
    options = _new_options(self, dtype, device)
    if isinstance(data, Tensor):
        _warnings.warn("To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() "
                       "rather than tensor.new_tensor(sourceTensor).", UserWarning, stacklevel=2)
        return _finish(data.detach().to(**options, copy=True), requires_grad)
    return _finish(_C.tensor(data, **options), requires_grad)


def _type(self, dtype=None, non_blocking=False, **kwargs):
    """Without dtype, the type name ('kael.FloatTensor'); with a dtype, a type name or a legacy
    type (kael.LongTensor), the tensor converted to it (itself when it already has it)."""
    if dtype is None:
        prefix = "kael.cuda." if self.device.type == "cuda" else "kael."
        return prefix + _TYPE_NAMES[self.dtype]
    if isinstance(dtype, str):
        name = dtype
        for prefix in ("kael.cuda.", "kael."):
            if name.startswith(prefix):
                name = name[len(prefix):]
                break
        if name not in _BY_TYPE_NAME:
            raise ValueError(f"type: invalid type: {dtype!r}")
        target = _BY_TYPE_NAME[name]
        if dtype.startswith("kael.cuda."):
            return self.to("cuda", target)
        return self.to(target)
    if isinstance(dtype, type) and hasattr(dtype, "_device_type"):  # kael.LongTensor, kael.cuda.FloatTensor
        return self.to(dtype._device_type, dtype.dtype)
    if dtype in _DTYPES:
        return self.to(dtype)
    raise TypeError(f"type: expected a kael.dtype or a type name, got {type(dtype).__name__}")


def _get_data(self):
    # torch's .data: detached, with a version counter of its own (writing through it does not
    # invalidate the tensors autograd saved); detach() shares the counter
    return self._data()


def _data_setter(self, value):
    self._set_data(value)


def _get_H(self):
    d = self.dim()
    if d == 2:
        return self.mT
    if d == 0:
        _warnings.warn("Tensor.H is deprecated on 0-D tensors. Consider using x.conj().", UserWarning, stacklevel=2)
        return self
    raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {d}-D tensor.")


def _get_mH(self):
    d = self.dim()
    if d == 0:
        _warnings.warn("Tensor.mH is deprecated on 0-D tensors. Consider using x.conj().", UserWarning,
                       stacklevel=2)
        return self
    if d < 2:
        raise RuntimeError(f"tensor.mH is only supported on matrices or batches of matrices. Got {d}-D tensor.")
    return self.mT


def _get_nbytes(self):
    return self.numel() * self.element_size()


class UntypedStorage:
    """A documented subset of torch.UntypedStorage: the bytes under a tensor (``nbytes()``,
    ``size()``, ``len()``, ``data_ptr()``, ``device``, ``element_size()``, reading bytes by index
    and ``tolist()``). Holds the storage alive."""

    __slots__ = ("_ref", "_address", "_nbytes", "_device")

    def __init__(self, ref, address, nbytes, device):
        self._ref, self._address, self._nbytes, self._device = ref, address, nbytes, device

    @property
    def device(self):
        return self._device

    @property
    def is_cuda(self):
        return self._device.type == "cuda"

    def data_ptr(self) -> int:
        return self._address

    def nbytes(self) -> int:
        return self._nbytes

    def size(self) -> int:
        return self._nbytes

    def element_size(self) -> int:
        return 1

    def __len__(self) -> int:
        return self._nbytes

    def _bytes(self) -> bytes:
        if self._device.type != "cpu":
            raise RuntimeError("UntypedStorage: reading bytes of a CUDA storage; call .cpu() on the tensor first")
        return _ctypes.string_at(self._address, self._nbytes) if self._nbytes else b""

    def tolist(self) -> list:
        return list(self._bytes())

    def __getitem__(self, index):
        return self._bytes()[index] if isinstance(index, int) else list(self._bytes()[index])

    def __repr__(self):
        return f" {' '.join(str(b) for b in self._bytes()[:20])}{' ...' if self._nbytes > 20 else ''}\n" \
               f"[kael.storage.UntypedStorage(device={self._device}) of size {self._nbytes}]"


def _untyped_storage(self):
    """The storage under the tensor (shared by its views), as a kael.UntypedStorage."""
    ref, address, nbytes, dev = _C._storage_ref(self)
    return UntypedStorage(ref, address, nbytes, dev)


# -------------------------------------------------------------- pickling and copying
#
# A tensor pickles as (dtype name, shape, raw bytes, state): state is a dict of what else is
# restored, today the Python subclass and the instance __dict__. _TENSOR_STATE_HOOKS are
# functions (tensor) -> dict merged into the state, and _TENSOR_RESTORE_HOOKS functions
# (tensor, state) called on the rebuilt tensor: autograd adds requires_grad there.

_TENSOR_STATE_HOOKS: list = []
_TENSOR_RESTORE_HOOKS: list = []


# requires_grad survives pickle and deepcopy, as in torch (a pickled non-leaf comes back as a
# leaf that requires grad; its history is not pickled).
def _requires_grad_state(t) -> dict:
    return {"requires_grad": True} if t.requires_grad else {}


def _restore_requires_grad(t, state) -> None:
    if state.get("requires_grad"):
        t.requires_grad_(True)


_TENSOR_STATE_HOOKS.append(_requires_grad_state)
_TENSOR_RESTORE_HOOKS.append(_restore_requires_grad)


def _slot_names(cls) -> list:
    """The __slots__ of cls and its Python bases below Tensor (copyreg's rule)."""
    import copyreg
    return [n for n in copyreg._slotnames(cls) if n not in ("__dict__", "__weakref__")]


def _state_of(self) -> dict:
    state = {}
    for hook in _TENSOR_STATE_HOOKS:
        state.update(hook(self))
    instance_dict = getattr(self, "__dict__", None)
    if instance_dict:
        state["__dict__"] = instance_dict
    if type(self) is not Tensor:
        slots = {n: getattr(self, n) for n in _slot_names(type(self)) if hasattr(self, n)}
        if slots:
            state["__slots__"] = slots
    return state


def _restore(t, cls, state):
    if cls is not Tensor:
        t = Tensor.__new__(cls, t)
    for hook in _TENSOR_RESTORE_HOOKS:
        hook(t, state)
    if state.get("__dict__"):
        t.__dict__.update(state["__dict__"])
    for name, value in state.get("__slots__", {}).items():
        setattr(t, name, value)
    return t


def _rebuild_tensor(cls, dtype_name, shape, data, state):
    dtype = getattr(_C, dtype_name, None) if isinstance(dtype_name, str) else None
    if not isinstance(dtype, _C.dtype):
        raise ValueError(f"unpickling a tensor: unknown dtype {dtype_name!r}")
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"unpickling a tensor: {cls!r} is not a Tensor type")
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"unpickling a tensor: expected its bytes, got {type(data).__name__}")
    if not (isinstance(shape, tuple) and all(type(s) is int and s >= 0 for s in shape)):
        raise ValueError(f"unpickling a tensor: invalid shape {shape!r}")
    numel = 1
    for s in shape:
        numel *= s
    if numel * dtype.itemsize != len(data):  # before anything is allocated
        raise ValueError(f"unpickling a tensor: {len(data)} bytes for shape {shape} of {dtype}")
    if data:
        t = _C.frombuffer(bytearray(data), dtype=dtype).reshape(shape)
    else:
        t = _C.empty(shape, dtype=dtype)
    return _restore(t, cls, state)


def _reduce_ex(self, protocol):
    if self.device.type != "cpu":
        raise RuntimeError(f"pickle: kael pickles CPU tensors only (got a tensor on {self.device}); call .cpu() first")
    c = self.detach().contiguous()
    nbytes = c.numel() * c.element_size()
    data = _ctypes.string_at(c.data_ptr(), nbytes) if nbytes else b""
    return (_rebuild_tensor, (type(self), str(self.dtype).split(".")[1], tuple(self.shape), data, _state_of(self)))


def _deepcopy(self, memo):
    import copy as _copy
    if not self.is_leaf:
        raise RuntimeError(
            "deepcopy: only tensors created explicitly by the user (graph leaves) support the deepcopy protocol "
            "at the moment; call .detach() first")
    if id(self) in memo:
        return memo[id(self)]
    state = _state_of(self)
    new = _restore(self.detach().clone(), type(self),
                   {k: v for k, v in state.items() if k not in ("__dict__", "__slots__")})
    memo[id(self)] = new
    if self.grad is not None:
        new.grad = _copy.deepcopy(self.grad, memo)
    for name, value in state.get("__slots__", {}).items():
        setattr(new, name, _copy.deepcopy(value, memo))
    if state.get("__dict__"):
        new.__dict__.update(_copy.deepcopy(state["__dict__"], memo))
    return new


# -------------------------------------------------------------- __kael_function__


def _convert(result, cls):
    if isinstance(result, Tensor) and not isinstance(result, cls):
        return result.as_subclass(cls)
    if isinstance(result, (tuple, list)) and type(result) in (tuple, list):
        return type(result)(_convert(r, cls) for r in result)
    return result


class DisableKaelFunction:
    """Context manager: calls inside run without __kael_function__ overrides (on this thread)."""

    def __enter__(self):
        self._previous = _C._kael_function_enabled(False)
        return self

    def __exit__(self, *exc):
        _C._kael_function_enabled(self._previous)
        return False


def _kael_function(cls, func, types, args=(), kwargs=None):
    """The default override (see Note [__kael_function__] in csrc/kael_function.h): runs func
    without overrides and returns its tensors as instances of cls. A subclass that keeps its type
    through kael's functions defines __kael_function__ and calls this through super()."""
    if kwargs is None:
        kwargs = {}
    if not _builtins.all(issubclass(cls, t) for t in types):
        return NotImplemented
    with DisableKaelFunction():
        result = func(*args, **kwargs)
    return _convert(result, cls)


def _format(self, format_spec):
    """format(t, spec): a 0-d tensor formats as its element (format(t, ".2f")), as torch's."""
    if self.dim() == 0 and type(self) is Tensor:
        return self.item().__format__(format_spec)
    return object.__format__(self, format_spec)


_TENSOR_EXTENSIONS = {
    "__kael_function__": classmethod(_kael_function),
    # NumPy's ufuncs and a NumPy operand's operators leave tensors alone (np.complex128(1j) + t
    # raises TypeError instead of turning t into an array); np.asarray(t) still shares memory.
    "__array_ufunc__": None,
    "numpy": _tensor_numpy,
    "__array__": _tensor_array,
    "__dlpack__": _tensor_dlpack,
    "__dlpack_device__": _tensor_dlpack_device,
    "new_zeros": _new_zeros,
    "new_ones": _new_ones,
    "new_empty": _new_empty,
    "new_full": _new_full,
    "new_tensor": _new_tensor,
    "type": _type,
    "data": property(_get_data, _data_setter, doc="The tensor's data as a tensor outside autograd (shares memory)."),
    "H": property(_get_H, doc="The conjugate transpose of a matrix (its transpose, for real dtypes)."),
    "mH": property(_get_mH, doc="The conjugate transpose of a batch of matrices (mT, for real dtypes)."),
    "nbytes": property(_get_nbytes, doc="The number of bytes of the elements (numel() * element_size())."),
    "is_cpu": property(lambda self: self.device.type == "cpu", doc="Whether the tensor is on the CPU."),
    "untyped_storage": _untyped_storage,
    "__reduce_ex__": _reduce_ex,
    "__deepcopy__": _deepcopy,
    "__format__": _format,
}


def _overridable_method(name, fn):
    """fn as a Tensor method that honours __kael_function__ overrides of self, as the C methods do
    (see Note [__kael_function__] in csrc/kael_function.h): the override receives Tensor.<name>."""

    def method(self, *args, **kwargs):
        if type(self) is not Tensor and _C._has_kael_function((self,)):
            return _C._handle_kael_function(getattr(Tensor, name), (self,) + args, kwargs)
        return fn(self, *args, **kwargs)

    method.__name__ = name
    method.__qualname__ = "Tensor." + name
    method.__doc__ = fn.__doc__
    method.__wrapped__ = fn
    return method


def _overridable_property(name, prop):
    """prop as a Tensor property whose getter and setter honour overrides of self (the override
    receives Tensor.<name>.__get__ / __set__, as torch passes them)."""

    def fget(self):
        if type(self) is not Tensor and _C._has_kael_function((self,)):
            return _C._handle_kael_function(getattr(Tensor, name).__get__, (self,))
        return prop.fget(self)

    def fset(self, value):
        if type(self) is not Tensor and _C._has_kael_function((self,)):
            _C._handle_kael_function(getattr(Tensor, name).__set__, (self, value))
            return
        prop.fset(self, value)

    return property(fget, fset if prop.fset is not None else None, doc=prop.__doc__)


for _name, _value in list(_TENSOR_EXTENSIONS.items()):
    if isinstance(_value, classmethod):
        _value.__func__.__name__ = _name
    elif isinstance(_value, property):
        _TENSOR_EXTENSIONS[_name] = _overridable_property(_name, _value)
    elif callable(_value) and hasattr(_value, "__name__"):
        _TENSOR_EXTENSIONS[_name] = _overridable_method(_name, _value)
_C._tensor_extend(_TENSOR_EXTENSIONS)


def _extend(methods: dict) -> None:
    """Adds methods to kael.Tensor: C methods as they are (they honour __kael_function__
    themselves), Python functions wrapped by _overridable_method."""
    _C._tensor_extend({name: fn if type(fn) is type(Tensor.add) else _overridable_method(name, fn)
                       for name, fn in methods.items()})
