"""torch's other spellings of kael's ops, and small torch functions written in Python from
registered ops (so autograd, a Python key and every device see those ops): the aliases
(``multiply`` is ``mul``, ``clip`` is ``clamp``...: the same C functions and methods, so an
error names the op, ``mul()``), the ``*_as`` views, the matrix-vector products, the NaN-ignoring
reductions, stacking helpers, ``meshgrid``, ``finfo``/``iinfo``. Each is compared
against torch in test/python/ops/test_composites.py."""
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
    "ger": "outer", "row_stack": "vstack",
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


# ---------------------------------------------------------------------------------- pointwise


def _floating(op, *tensors):
    for t in tensors:
        if isinstance(t, Tensor) and not t.dtype.is_floating_point:
            raise RuntimeError(f"{op}: not implemented for dtype {t.dtype} (floating inputs only, as torch's kernel)")


def float_power(input, exponent) -> Tensor:
    """pow computed in float64, as torch.float_power."""
    a = input.to(_C.float64) if isinstance(input, Tensor) else float(input)
    b = exponent.to(_C.float64) if isinstance(exponent, Tensor) else float(exponent)
    return _C.pow(a, b) if isinstance(a, Tensor) else _C.pow(_C.tensor(a, dtype=_C.float64), b)


# ---------------------------------------------------------------------------------- indexing and shapes


def tensordot(a: Tensor, b: Tensor, dims=2) -> Tensor:
    """Sum of products over the last dims of a and the first of b (dims an int), or over the
    given pairs of dims, as torch.tensordot; through permute, reshape and matmul."""
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        da, db = list(range(a.dim() - dims, a.dim())), list(range(dims))
    else:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(da) != len(db):
        raise RuntimeError(f"both dimension lists should have same length, got {len(da)} and {len(db)}")
    da = [d + a.dim() if d < 0 else d for d in da]
    db = [d + b.dim() if d < 0 else d for d in db]
    for x, y in zip(da, db):
        if a.shape[x] != b.shape[y]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[x]} in dim {x} "
                               f"and second has size {b.shape[y]} in dim {y}")
    ka = [d for d in range(a.dim()) if d not in da]
    kb = [d for d in range(b.dim()) if d not in db]
    k = 1
    for d in da:
        k *= a.shape[d]
    m = n = 1
    for d in ka:
        m *= a.shape[d]
    for d in kb:
        n *= b.shape[d]
    left = a.permute(ka + da).reshape(m, k)  # sizes spelled out: -1 is ambiguous when k is 0
    right = b.permute(db + kb).reshape(k, n)
    return _C.matmul(left, right).reshape([a.shape[d] for d in ka] + [b.shape[d] for d in kb])


# ---------------------------------------------------------------------------------- statistics


# ---------------------------------------------------------------------------------- combining



def block_diag(*tensors) -> Tensor:
    """The tensors (0-d, 1-d as a row, 2-d) on the diagonal of a zero matrix, as torch.block_diag."""
    mats = [t.reshape(1, 1) if t.dim() == 0 else t.reshape(1, -1) if t.dim() == 1 else t for t in tensors]
    for t in mats:
        if t.dim() != 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input has "
                               f"{t.dim()} dimensions")
    if not mats:
        return _C.zeros(1, 0)
    dtype = mats[0].dtype
    for t in mats[1:]:
        dtype = _C.promote_types(dtype, t.dtype) if hasattr(_C, "promote_types") else _C.result_type(
            _C.zeros(1, dtype=dtype), t)
    rows, cols = sum(t.shape[0] for t in mats), sum(t.shape[1] for t in mats)
    out = _C.zeros(rows, cols, dtype=dtype, device=mats[0].device)
    r = c = 0
    for t in mats:
        out[r:r + t.shape[0], c:c + t.shape[1]] = t
        r, c = r + t.shape[0], c + t.shape[1]
    return out


def cartesian_prod(*tensors) -> Tensor:
    """The rows of the cartesian product of 1-d tensors, as torch.cartesian_prod."""
    for t in tensors:
        if t.dim() != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return _C.stack([g.reshape(-1) for g in grids], 1)


# ---------------------------------------------------------------------------------- predicates


def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """True where an element of `elements` is among `test_elements`, as torch.isin."""
    e = elements if isinstance(elements, Tensor) else _C.tensor(elements)
    t = test_elements if isinstance(test_elements, Tensor) else _C.tensor(test_elements)
    t = t.reshape(-1)
    if t.dtype.is_floating_point:  # NaN equals nothing; left in, it would break the sorted search
        t = t[_C.logical_not(_C.isnan(t))]
    if t.numel() == 0:
        found = _C.zeros_like(e, dtype=_C.bool)
    else:
        st = _C.sort(t).values
        pos = _C.clamp(_C.searchsorted(st, e.reshape(-1).contiguous().to(st.dtype) if e.dtype != st.dtype else
                                       e.reshape(-1).contiguous()), max=st.numel() - 1)
        found = _C.eq(_C.index_select(st, 0, pos), e.reshape(-1)).reshape(e.shape)
    return _C.logical_not(found) if invert else found


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
        type = _C.get_default_dtype() if type is None else type
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


# ---------------------------------------------------------------------------------- more (selection, bins, signs, splits)

def atleast_3d(*tensors):
    """Each tensor with at least three dims, as torch.atleast_3d ((n,) -> (1, n, 1), (m, n) ->
    (m, n, 1))."""
    one = len(tensors) == 1
    ts = _tensors("atleast_3d", tensors[0]) if one and isinstance(tensors[0], (list, tuple)) else list(tensors)

    def three(t):
        if t.dim() == 0:
            return t.reshape(1, 1, 1)
        if t.dim() == 1:
            return t.unsqueeze(0).unsqueeze(-1)
        if t.dim() == 2:
            return t.unsqueeze(-1)
        return t

    out = [three(t) for t in ts]
    return out[0] if one and isinstance(tensors[0], Tensor) else tuple(out)


def _tensor_input(op, input):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")


def resolve_conj(input: Tensor) -> Tensor:
    """input itself: kael has no lazily conjugated views to materialise (torch returns input too
    for those that are not)."""
    _tensor_input("resolve_conj", input)
    return input


def resolve_neg(input: Tensor) -> Tensor:
    """input itself: kael has no lazily negated views to materialise."""
    _tensor_input("resolve_neg", input)
    return input


def sum_to_size(self: Tensor, *size) -> Tensor:
    """self summed over the dims that broadcasting `size` to self's shape expanded, as
    torch.Tensor.sum_to_size."""
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = tuple(size[0])
    size = tuple(int(s) for s in size)
    lead = self.dim() - len(size)
    ok = lead >= 0 and all(s == 1 or s == self.shape[lead + i] for i, s in enumerate(size))
    if not ok:
        raise RuntimeError(f"size {{{', '.join(map(str, size))}}} is not expandable to size "
                           f"{{{', '.join(map(str, self.shape))}}}.")
    dims = list(range(lead)) + [lead + i for i, s in enumerate(size) if s == 1 and self.shape[lead + i] != 1]
    out = _C.sum(self, dims, True) if dims else self
    return out.reshape(size) if lead else out


# ---------------------------------------------------------------------------------- registration

FUNCTIONS = ["broadcast_shapes", "atleast_1d", "atleast_2d", "meshgrid", "finfo", "iinfo", "float_power",
             "tensordot", "block_diag", "cartesian_prod", "isin", "atleast_3d",
             "resolve_conj", "resolve_neg"]
METHODS = ["float_power", "sum_to_size", "resolve_conj", "resolve_neg"]


# The Tensor members install() adds (kael/_C.pyi's hand-written part has their stubs, the
# aliases excepted: they are the generated methods under another name).
TENSOR_MEMBERS: dict = {}
ALIAS_MEMBERS = {alias + suffix for alias in _ALIASES for suffix in ("", "_")} | {"ndimension", "nelement"}


def install(namespace: dict, extend):
    """Adds the functions to the kael namespace and the methods to kael.Tensor (through `extend`,
    which wraps them for __kael_function__ overrides); returns the function names added."""
    functions, methods = _aliases()
    for name in FUNCTIONS:
        functions[name] = globals()[name]
    namespace.update(functions)
    methods.update({name: globals()[name] for name in METHODS})
    extend(methods)
    TENSOR_MEMBERS.update(methods)
    return list(functions)
