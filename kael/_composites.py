"""torch's other spellings of kael's ops, and small torch functions written in Python from
registered ops (so autograd, a Python key and every device see those ops): the aliases
(``multiply`` is ``mul``, ``clip`` is ``clamp``...: the same C functions and methods, so an
error names the op, ``mul()``), the ``*_as`` views, the matrix-vector products, ``addcmul`` and
``addcdiv``, the NaN-ignoring reductions, stacking helpers, ``meshgrid``, ``diff``,
``repeat_interleave``, ``tril_indices``/``triu_indices``, ``finfo``/``iinfo``. Each is compared
against torch in test/python/test_composites.py."""
from __future__ import annotations

import builtins as _builtins
import math as _math
import warnings as _warnings

from kael import _C
from kael._C import Tensor

# ---------------------------------------------------------------------------------- aliases

# torch name -> kael name, for both kael.<name> (where the original is a function) and
# Tensor.<name> (where it is a method); in-place forms follow their originals.
_ALIASES = {
    "multiply": "mul", "subtract": "sub", "divide": "div", "true_divide": "div", "negative": "neg",
    "absolute": "abs", "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le",
    "not_equal": "ne", "clip": "clamp", "arctan2": "atan2", "fix": "trunc", "arccos": "acos",
    "arcsin": "asin", "arctan": "atan", "concat": "cat", "concatenate": "cat", "swapdims": "swapdims",
}


def _aliases():
    functions, methods = {}, {}
    for alias, name in _ALIASES.items():
        if alias == name:
            continue
        if hasattr(_C, name):
            functions[alias] = getattr(_C, name)
        for suffix in ("", "_"):
            original = Tensor.__dict__.get(name + suffix)
            if original is not None:
                methods[alias + suffix] = original
    methods["ndimension"] = Tensor.__dict__["dim"]
    methods["nelement"] = Tensor.__dict__["numel"]
    return functions, methods


# ---------------------------------------------------------------------------------- views


def type_as(self: Tensor, other: Tensor) -> Tensor:
    """self converted to other's dtype (self itself when it already has it)."""
    return self.to(other.dtype)


def view_as(self: Tensor, other: Tensor) -> Tensor:
    """self.view(other.shape)."""
    return self.view(other.shape)


def reshape_as(self: Tensor, other: Tensor) -> Tensor:
    """self.reshape(other.shape)."""
    return self.reshape(other.shape)


def broadcast_to(input: Tensor, size) -> Tensor:
    """input expanded to size (a view; -1 keeps a dim), as torch.broadcast_to."""
    return input.expand(size)


def broadcast_shapes(*shapes):
    """The shape the given shapes broadcast to (ints are 1-d shapes), as torch.broadcast_shapes."""
    result = []
    for shape in shapes:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        for s in shape:
            if not isinstance(s, int) or isinstance(s, _builtins.bool):
                raise TypeError(f"broadcast_shapes: expected ints in the shapes, got {type(s).__name__}")
            if s < 0:
                raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(shape)}")
        n = max(len(result), len(shape))
        a = [1] * (n - len(result)) + result
        b = [1] * (n - len(shape)) + list(shape)
        for i in range(n):
            if a[i] != b[i] and a[i] != 1 and b[i] != 1:
                raise RuntimeError(f"Shape mismatch: objects cannot be broadcast to a single shape.  "
                                   f"Mismatch is between arg 0 and arg 1: {tuple(a)} and {tuple(b)}")
        result = [b[i] if a[i] == 1 else a[i] for i in range(n)]
    return _C.Size(result) if hasattr(_C, "Size") else tuple(result)


def numel(input: Tensor) -> int:
    """The number of elements of input."""
    return input.numel()


# ---------------------------------------------------------------------------------- products


def _check_same_dtype(op, a, b, words):
    if a.dtype != b.dtype:
        raise RuntimeError(f"{op}: expected {words} to have the same dtype, but got: {a.dtype} != {b.dtype}")


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """The matrix product of two matrices (no broadcasting), as torch.mm."""
    if input.dim() != 2:
        raise RuntimeError(f"mm: self must be a matrix, got a tensor of {input.dim()} dims")
    if mat2.dim() != 2:
        raise RuntimeError(f"mm: mat2 must be a matrix, got a tensor of {mat2.dim()} dims")
    _check_same_dtype("mm", input, mat2, "self and mat2")
    return _C.matmul(input, mat2)


def mv(input: Tensor, vec: Tensor) -> Tensor:
    """The product of a matrix and a vector, as torch.mv."""
    if input.dim() != 2 or vec.dim() != 1:
        raise RuntimeError(f"mv: vector + matrix @ vector expected, got {input.dim()}, {vec.dim()}")
    _check_same_dtype("mv", input, vec, "self and vec")
    return _C.matmul(input, vec)


def dot(input: Tensor, tensor: Tensor) -> Tensor:
    """The inner product of two 1-d tensors of one dtype and length, as torch.dot."""
    if input.dim() != 1 or tensor.dim() != 1:
        raise RuntimeError(f"dot: 1D tensors expected, but got {input.dim()}D and {tensor.dim()}D tensors")
    if input.dtype != tensor.dtype:
        raise RuntimeError(f"dot: expected both vectors to have same dtype, but found {input.dtype} and {tensor.dtype}")
    if input.numel() != tensor.numel():
        raise RuntimeError(f"dot: inconsistent tensor size, expected tensor [{input.numel()}] and src "
                           f"[{tensor.numel()}] to have the same number of elements, but got {input.numel()} "
                           f"and {tensor.numel()} elements respectively")
    return _C.matmul(input, tensor)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """The outer product of two 1-d tensors (with type promotion), as torch.outer."""
    if input.dim() != 1 or vec2.dim() != 1:
        raise RuntimeError(f"outer: expected 1-d tensors, got {input.dim()}D and {vec2.dim()}D")
    return _C.mul(input.reshape(-1, 1), vec2)


def trace(input: Tensor) -> Tensor:
    """The sum of a matrix's diagonal (integers sum to int64), as torch.trace."""
    if input.dim() != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.dim()}")
    return _C.diagonal(input).sum()


def _value_in(value, *tensors):
    """value as torch's kernel reads it: converted to the tensors' common dtype (a float value on
    integer tensors is truncated)."""
    if all(not t.dtype.is_floating_point for t in tensors) and isinstance(value, float):
        return int(value)
    return value


def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:
    """input + value * tensor1 * tensor2, multiplied in that order, as torch.addcmul."""
    return _C.add(input, _C.mul(_C.mul(tensor1, _value_in(value, input, tensor1, tensor2)), tensor2))


def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:
    """input + value * tensor1 / tensor2, as torch.addcdiv (integer tensors raise, as there)."""
    if not (tensor1.dtype.is_floating_point or tensor2.dtype.is_floating_point):
        raise RuntimeError("addcdiv: Integer division with addcdiv is no longer supported, and in a future "
                           "release addcdiv will perform a true division of tensor1 and tensor2. Use "
                           "input + value * tensor1 / tensor2 (or torch.floor_divide) instead.")
    return _C.add(input, _C.div(_C.mul(tensor1, value), tensor2))


def _in_place(name, fn):
    """fn's in-place method: the result computed out of place, checked against self (shape, then
    dtype), then written by copy_ (so a failing check leaves self alone)."""

    def method(self, *args, **kwargs):
        result = fn(self, *args, **kwargs)
        if tuple(result.shape) != tuple(self.shape):
            raise ValueError(f"{name}: output with shape {list(self.shape)} doesn't match the broadcast shape "
                             f"{list(result.shape)}")
        if not _C.can_cast(result.dtype, self.dtype):
            raise RuntimeError(f"{name}: result type {result.dtype} can't be cast to the desired output type "
                               f"{self.dtype}")
        return self.copy_(result)

    method.__name__ = name
    method.__doc__ = f"In-place version of {name[:-1]}."
    return method


# ---------------------------------------------------------------------------------- reductions


def nansum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """sum treating NaN as zero, as torch.nansum."""
    x = _C.where(_C.isnan(input), 0, input) if input.dtype.is_floating_point else input
    return _C.sum(x, dim, keepdim, dtype=dtype)


def nanmean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """mean over the elements that are not NaN, as torch.nanmean (floating inputs only)."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype but got {input.dtype}")
    keep = _C.logical_not(_C.isnan(input))
    return _C.div(nansum(input, dim, keepdim, dtype=dtype), _C.sum(keep, dim, keepdim))


# ---------------------------------------------------------------------------------- stacking


def _tensors(op, tensors):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}(): argument 'tensors' must be tuple of Tensors, not {type(tensors).__name__}")
    return list(tensors)


def atleast_1d(*tensors):
    """Each tensor with at least one dim (0-d become (1,)), as torch.atleast_1d."""
    one = len(tensors) == 1
    ts = _tensors("atleast_1d", tensors[0]) if one and isinstance(tensors[0], (list, tuple)) else list(tensors)
    out = [t.reshape(1) if t.dim() == 0 else t for t in ts]
    return out[0] if one and isinstance(tensors[0], Tensor) else tuple(out)


def atleast_2d(*tensors):
    """Each tensor with at least two dims (new dims in front), as torch.atleast_2d."""
    one = len(tensors) == 1
    ts = _tensors("atleast_2d", tensors[0]) if one and isinstance(tensors[0], (list, tuple)) else list(tensors)
    out = [t.reshape(1, 1) if t.dim() == 0 else t.unsqueeze(0) if t.dim() == 1 else t for t in ts]
    return out[0] if one and isinstance(tensors[0], Tensor) else tuple(out)


def hstack(tensors, *, out=None) -> Tensor:
    """Concatenates along dim 1 (dim 0 for 1-d tensors), as torch.hstack."""
    ts = atleast_1d(_tensors("hstack", tensors))
    if not ts:
        raise RuntimeError("hstack expects a non-empty TensorList")
    return _C.cat(ts, 0 if ts[0].dim() == 1 else 1)


def vstack(tensors, *, out=None) -> Tensor:
    """Concatenates along dim 0 after making every tensor at least 2-d, as torch.vstack."""
    ts = atleast_2d(_tensors("vstack", tensors))
    if not ts:
        raise RuntimeError("vstack expects a non-empty TensorList")
    return _C.cat(ts, 0)


def meshgrid(*tensors, indexing: str | None = None):
    """Coordinate grids of 0-d or 1-d tensors (expanded views), as torch.meshgrid; indexing='ij'
    (the default, with torch's warning when it is not given) or 'xy'."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        _warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.",
                       UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}")
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    for t in tensors:
        if t.dim() > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t.dim()}D")
        if t.dtype != tensors[0].dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    ts = [t.reshape(-1) for t in tensors]
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = [t.numel() for t in ts]
    grids = []
    for i, t in enumerate(ts):
        view = [1] * len(ts)
        view[i] = -1
        grids.append(t.view(view).expand(shape))
    if swap:  # 'xy': the grids of (y, x, ...) in 'ij' order, the first two handed back swapped
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


# ---------------------------------------------------------------------------------- sequences


def diff(input: Tensor, n: int = 1, dim: int = -1, prepend=None, append=None) -> Tensor:
    """The n-th forward difference along dim (bool: logical xor), with optional prepend/append
    tensors, as torch.diff."""
    if input.dim() == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    if prepend is not None or append is not None:
        parts = [p for p in (prepend, input, append) if p is not None]
        input = _C.cat([p if isinstance(p, Tensor) else _C.full_like(input.narrow(dim, 0, 1), p) for p in parts], dim)
    for _ in range(n):
        size = input.shape[dim]
        if size == 0:
            break
        a, b = input.narrow(dim, 1, size - 1), input.narrow(dim, 0, size - 1)
        input = _C.logical_xor(a, b) if input.dtype == _C.bool else _C.sub(a, b)
    return input


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None) -> Tensor:
    """Each element (each slice along dim) repeated, as torch.repeat_interleave: repeats is an int
    or a 1-d tensor of counts; dim=None works on the flattened input."""
    if repeats is None:  # torch.repeat_interleave(counts): the indices repeated
        counts = input
        return repeat_interleave(_C.arange(counts.numel(), device=counts.device), counts, 0)
    if dim is None:
        input, dim = input.reshape(-1), 0
    dim = dim + input.dim() if dim < 0 else dim
    if not 0 <= dim < _builtins.max(input.dim(), 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-input.dim()}, {input.dim() - 1}], "
                         f"but got {dim})")
    if isinstance(repeats, Tensor) and repeats.dim() == 0:
        repeats = int(repeats.item())
    if isinstance(repeats, int):
        if repeats < 0:
            raise RuntimeError("repeats can not be negative")
        shape = list(input.shape)
        expanded = input.unsqueeze(dim + 1).expand(shape[:dim + 1] + [repeats] + shape[dim + 1:])
        shape[dim] *= repeats
        return expanded.reshape(shape)
    if repeats.dim() != 1:
        raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
    if repeats.dtype not in (_C.int64, _C.int32):
        raise RuntimeError("repeats has to be Long or Int tensor")
    if repeats.numel() != input.shape[dim]:
        raise RuntimeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                           f"{repeats.numel()} and input.size({dim}) = {input.shape[dim]}")
    if repeats.numel() and bool(_C.lt(repeats, 0).any().item()):
        raise RuntimeError("repeats can not be negative")
    ends = _C.cumsum(repeats, 0)
    total = int(ends[-1].item()) if repeats.numel() else 0
    index = _C.searchsorted(ends, _C.arange(total, dtype=ends.dtype, device=ends.device), right=True)
    return _C.index_select(input, dim, index)


def _triangle_indices(op, lower, row, col, offset, dtype, device):
    if row < 0 or col < 0:
        raise RuntimeError(f"{op}: row and col must be non-negative, got {row} and {col}")
    if dtype is not None and dtype not in (_C.int64, _C.int32):
        raise RuntimeError(f"\"{op}\" not implemented for '{dtype}'")
    ones = _C.ones(row, col, dtype=_C.bool, device=device)
    mask = _C.tril(ones, offset) if lower else _C.triu(ones, offset)
    return _C.nonzero(mask).t().contiguous().to(dtype or _C.int64)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None, layout=None) -> Tensor:
    """The (2, N) row and column indices of the lower triangle of a row x col matrix, row by row."""
    return _triangle_indices("tril_indices", True, row, col, offset, dtype, device)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None, layout=None) -> Tensor:
    """The (2, N) row and column indices of the upper triangle of a row x col matrix, row by row."""
    return _triangle_indices("triu_indices", False, row, col, offset, dtype, device)


def isposinf(input: Tensor) -> Tensor:
    """True where input is +inf."""
    return _C.eq(input, _math.inf) if input.dtype.is_floating_point else _C.zeros_like(input, dtype=_C.bool)


def isneginf(input: Tensor) -> Tensor:
    """True where input is -inf."""
    return _C.eq(input, -_math.inf) if input.dtype.is_floating_point else _C.zeros_like(input, dtype=_C.bool)


def flipud(input: Tensor) -> Tensor:
    """input flipped along dim 0."""
    if input.dim() < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return _C.flip(input, [0])


def fliplr(input: Tensor) -> Tensor:
    """input flipped along dim 1."""
    if input.dim() < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return _C.flip(input, [1])


# ---------------------------------------------------------------------------------- dtype facts


class finfo:
    """Machine limits of a floating dtype (kael.finfo(kael.float16).max), as torch.finfo."""

    _TABLE = {
        # bits, eps, max, tiny (smallest normal), resolution
        "float16": (16, 2.0 ** -10, 65504.0, 2.0 ** -14, 0.001),
        "bfloat16": (16, 2.0 ** -7, 3.3895313892515355e38, 1.1754943508222875e-38, 0.01),
        "float32": (32, 2.0 ** -23, 3.4028234663852886e38, 1.1754943508222875e-38, 1e-06),
        "float64": (64, 2.0 ** -52, 1.7976931348623157e308, 2.2250738585072014e-308, 1e-15),
    }

    def __init__(self, type=None):
        type = _C.float32 if type is None else type
        name = str(type).split(".")[-1]
        if name not in self._TABLE:
            raise TypeError(f"finfo: expected a floating point dtype, got {type}")
        self.bits, self.eps, self.max, self.tiny, self.resolution = self._TABLE[name]
        self.min = -self.max
        self.smallest_normal = self.tiny
        self.dtype = name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype (kael.iinfo(kael.int32).max), as torch.iinfo."""

    _TABLE = {"uint8": (8, 0, 255), "int8": (8, -128, 127), "int16": (16, -2 ** 15, 2 ** 15 - 1),
              "int32": (32, -2 ** 31, 2 ** 31 - 1), "int64": (64, -2 ** 63, 2 ** 63 - 1)}

    def __init__(self, type):
        name = str(type).split(".")[-1]
        if name not in self._TABLE:
            raise TypeError(f"iinfo: expected an integer dtype, got {type}")
        self.bits, self.min, self.max = self._TABLE[name]
        self.dtype = name

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


def get_default_dtype():
    """The dtype of floating tensors made without one (kael.float32; kael has no set_default_dtype)."""
    return _C.float32


# ---------------------------------------------------------------------------------- registration

FUNCTIONS = ["broadcast_to", "broadcast_shapes", "numel", "mm", "mv", "dot", "outer", "trace", "addcmul",
             "addcdiv", "nansum", "nanmean", "atleast_1d", "atleast_2d", "hstack", "vstack", "meshgrid",
             "diff", "repeat_interleave", "tril_indices", "triu_indices", "isposinf", "isneginf", "flipud",
             "fliplr", "finfo", "iinfo", "get_default_dtype"]
METHODS = ["type_as", "view_as", "reshape_as", "broadcast_to", "mm", "mv", "dot", "outer", "trace", "addcmul",
           "addcdiv", "nansum", "nanmean", "diff", "repeat_interleave", "isposinf", "isneginf", "flipud", "fliplr"]


def install(namespace: dict, extend):
    """Adds the functions to the kael namespace and the methods to kael.Tensor (through `extend`,
    which wraps them for __kael_function__ overrides); returns the function names added."""
    functions, methods = _aliases()
    for name in FUNCTIONS:
        functions[name] = globals()[name]
    namespace.update(functions)
    methods.update({name: globals()[name] for name in METHODS})
    methods["ger"] = outer
    methods["addcmul_"] = _in_place("addcmul_", addcmul)
    methods["addcdiv_"] = _in_place("addcdiv_", addcdiv)
    extend(methods)
    return list(functions)
