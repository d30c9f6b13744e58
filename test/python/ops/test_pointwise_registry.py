"""Every `pointwise:` entry of native_functions.yaml, tested against PyTorch from the registry.

Nothing here names an op: the entries come from the registry (parsed with codegen.model), the
oracle is the torch function of the same name, and the dtypes are every dtype of
codegen/enums.py, taken by name from both libraries. A new entry, or a new dtype in an entry's
`dtypes:`, is covered without writing a test.

Each op runs over
- dtypes: every dtype. Where the compute dtype (after promotion) is one the entry lists, kael
  gives torch's result or raises where torch raises; where it is one the entry leaves out, kael
  raises, with "<op>: not implemented for dtype <dtype>" where torch computes;
- layouts: contiguous, transposed, step-sliced (with an offset), expanded, 0-d, empty, and a
  size above the loops' threading grain (read from aten/include/kael/native/loops.h) run on
  two threads; for two-input ops also broadcasting, 0-d operands and every pair of dtypes;
- special values: 0, -0, +-inf, NaN, negatives and the integer limits (every pair of them for
  two-input ops);
- variants: function, method, in-place and out= (those the entry has); Python numbers for
  either input of two-input ops; the Scalar arguments (alpha).

What is compared: values (NaN and infinities in the same places, floats within the tolerance
of helpers.DEFAULT_TOL, else torch.testing's, for the less precise of the tensor's dtype and
the dtype the op computes its result in: a bfloat16 result written to a float32 out carries
bfloat16's precision), dtypes, shapes, and the strides of new results and of out;
that in-place calls return self and out= calls return out; the warnings; the class of the
exception where torch raises; and what the call left in every tensor it was given, the bases of
views included: what torch left after a call that computes (so writes through views land where
torch's do), what was there before after one that raises (every check comes before the first
write).

Where torch has no such variant (`Tensor.maximum_`, `torch.relu(out=)`) or takes no number in
that position (`torch.maximum(t, 2)`), the reference is torch's function with torch's in-place
and out= rules applied to it, and numbers are wrapped numbers, as in torch's operators (see
TorchOp). Deliberate differences from torch, each where it is handled:
- kael's dtype errors are RuntimeErrors where torch raises NotImplementedError (a subclass;
  docs/decisions/errors.md); its shape errors are torch's RuntimeError;
- torch.abs and torch.neg take only an out= of the input's dtype; kael casts to any out dtype
  the result can be cast to, as torch's other ops do.
torch.pow(number, tensor) allocates a contiguous result (its pow(Scalar, Tensor) overload), and
so does kael (registry key number_self_contiguous): its strides are compared with torch's own.

The last sections test the tests: wrong implementations, and a wrong formula built into the
real extension, must fail this harness.
"""
from __future__ import annotations

import json
import math
import re
import shlex
import shutil
import subprocess
import sys
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import torch

import kael
from helpers import DEFAULT_TOL, POINTWISE_BY_HAND

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from codegen import enums  # noqa: E402
from codegen.model import parse_registry  # noqa: E402

REGISTRY = parse_registry((ROOT / "native_functions.yaml").read_text(), "native_functions.yaml")
BY_HAND = POINTWISE_BY_HAND  # entries compared by hand (helpers.py says where)
POINTWISE = [f for f in REGISTRY if f.is_pointwise and f.name not in BY_HAND]
BY_NAME = {f.name: f for f in POINTWISE}
DTYPES = list(enums.DTYPE_NAMES)


def _grain():
    text = (ROOT / "aten/include/kael/native/loops.h").read_text()
    m = re.search(r"kParallelGrain\s*=\s*(\d+)", text)
    assert m, "kParallelGrain not found in loops.h"
    return int(m.group(1))


GRAIN = _grain()
# Above the grain, with an odd row length so no row is a multiple of a vector width.
BIG = (GRAIN // 257 + 2, 257)
assert BIG[0] * BIG[1] > GRAIN


# ---------------------------------------------------------------- dtypes and conversions

def tdt(name):
    return getattr(torch, name)


def kdt(name):
    return getattr(kael, name)


def dtype_name(dtype):
    """'float32' for torch.float32 and kael.float32 alike."""
    text = str(dtype) if isinstance(dtype, torch.dtype) else repr(dtype)
    return text.rsplit(".", 1)[-1]


def is_floating(name):
    return tdt(name).is_floating_point


def _wide(name):
    """A NumPy dtype that holds every value of the dtype exactly."""
    if name == "bool":
        return np.bool_
    return np.float64 if is_floating(name) else np.int64


def numpy_of(t):
    """The values of a torch tensor in a NumPy array of a wide dtype (a copy: a tensor whose
    storage NumPy shares cannot be resized any more)."""
    name = dtype_name(t.dtype)
    wide = torch.bool if name == "bool" else torch.float64 if is_floating(name) else torch.int64
    return t.detach().to(wide, copy=True).numpy()


def to_kael(t):
    """A contiguous kael copy of a torch tensor (through a NumPy array of a wide dtype)."""
    name = dtype_name(t.dtype)
    k = kael.tensor(numpy_of(t), dtype=kdt(name))
    assert k.shape == tuple(t.shape) and dtype_name(k.dtype) == name
    return k


def to_numpy(k):
    """The values of a kael tensor in a NumPy array of a wide dtype (through tolist)."""
    return np.array(k.tolist(), dtype=_wide(dtype_name(k.dtype))).reshape(k.shape)


def to_torch(k):
    """A torch copy of a kael tensor."""
    return torch.from_numpy(to_numpy(k)).to(tdt(dtype_name(k.dtype)))


# torch.testing's default (rtol, atol) for the dtypes helpers.DEFAULT_TOL does not list.
TORCH_TOL = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5)}


def tolerance(name):
    if name in DEFAULT_TOL:
        return DEFAULT_TOL[name]
    if name in TORCH_TOL:
        return TORCH_TOL[name]
    return 2 * torch.finfo(tdt(name)).eps, 1e-5


def check_tensor(k, t, what="result", strides=True, layout=None, computed_in=None):
    """k equals t in shape, dtype, values (NaN and infinities in the same places; floats
    within the dtype's tolerance, or within that of computed_in when the values were computed
    in a less precise dtype, such as a bfloat16 result written to a float32 out; everything
    else exactly) and, when asked, strides (of layout, when given, instead of t's)."""
    assert isinstance(k, kael.Tensor), f"{what}: expected a kael.Tensor, got {type(k).__name__}"
    assert k.shape == tuple(t.shape), f"{what}: shape {k.shape} != torch {tuple(t.shape)}"
    name = dtype_name(t.dtype)
    assert dtype_name(k.dtype) == name, f"{what}: dtype {k.dtype} != torch {t.dtype}"
    kv, tv = to_numpy(k), numpy_of(t)
    if is_floating(name):
        rtol, atol = tolerance(name)
        if computed_in is not None and is_floating(computed_in):
            rtol, atol = max(rtol, tolerance(computed_in)[0]), max(atol, tolerance(computed_in)[1])
        with np.errstate(invalid="ignore"):
            same = (kv == tv) | (np.isnan(kv) & np.isnan(tv))
            close = same | (np.abs(kv - tv) <= atol + rtol * np.abs(tv))
    else:
        close = kv == tv
    if not close.all():
        bad = np.argwhere(~close)[:5].tolist()
        lines = "\n".join(f"  at {tuple(i)}: kael {kv[tuple(i)]!r}, torch {tv[tuple(i)]!r}" for i in bad)
        raise AssertionError(f"{what}: {int((~close).sum())} of {close.size} values differ from torch "
                             f"({name}; first ones below)\n{lines}")
    layout = t if layout is None else layout
    if strides and t.numel() > 1:
        # Strides of size-1 dims carry no layout; compare the others.
        ks = [s for s, n in zip(k.stride(), k.shape) if n > 1]
        ts = [s for s, n in zip(layout.stride(), layout.shape) if n > 1]
        assert ks == ts, f"{what}: strides {k.stride()} != torch {tuple(layout.stride())} (shape {k.shape})"


# ---------------------------------------------------------------- values

FLOAT_SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -3.0, 10.0, -100.0, 1e-3, math.inf, -math.inf, math.nan]
INT_SPECIALS = [0, 1, -1, 2, -3, 7, 100]


def specials(name):
    """The special values of a dtype, each representable in it."""
    if name == "bool":
        return [False, True]
    if is_floating(name):
        return torch.tensor(FLOAT_SPECIALS, dtype=torch.float64).to(tdt(name)).tolist()
    info = torch.iinfo(tdt(name))
    return [v for v in INT_SPECIALS if info.min <= v <= info.max] + [info.min, info.max]


def random_values(name, shape, gen):
    """Random values of a dtype with its special values at random places."""
    shape = tuple(shape)
    td = tdt(name)
    if name == "bool":
        t = torch.randint(0, 2, shape, generator=gen).bool()
    elif is_floating(name):
        t = (torch.randn(shape, generator=gen, dtype=torch.float64) * 3).to(td)
    else:
        info = torch.iinfo(td)
        t = torch.randint(max(info.min, -20), min(info.max, 20) + 1, shape, generator=gen, dtype=torch.int64).to(td)
    flat = t.view(-1)
    if flat.numel() > 1:
        vals = specials(name)
        places = torch.randperm(flat.numel(), generator=gen)[:len(vals)]
        for p, v in zip(places.tolist(), vals):
            flat[p] = v
    return t


def seeded(*parts):
    return torch.Generator().manual_seed(zlib.crc32(repr(parts).encode()))


# ---------------------------------------------------------------- operands and layouts

@dataclass
class Operand:
    """One input: a torch tensor and the equal kael tensor made by the same view ops on an
    equal base, or a Python number (t and k are the number)."""
    t: object
    k: object
    tbase: object = None
    kbase: object = None
    label: str = ""

    @property
    def is_tensor(self):
        return isinstance(self.t, torch.Tensor)


def _step_view(x, shape):
    n = len(shape)
    return x[(slice(1, None),) * (n - 1) + (slice(1, None, 2),)]


LAYOUTS = {
    # name: (base shape of a view of `shape`, the view)
    "contiguous": (lambda s: s, lambda x, s: x),
    "transposed": (lambda s: s[::-1], lambda x, s: x.permute(*reversed(range(len(s))))),
    "step-sliced": (lambda s: tuple(d + 1 for d in s[:-1]) + (2 * s[-1] + 1,), _step_view),
    "expanded": (lambda s: (1,) + s[1:], lambda x, s: x.expand(*s)),
}


_LARGE = {}


def _large_base(name, shape, salt):
    """Random values for a base above the grain, made once (a torch tensor and its NumPy copy)."""
    key = (name, shape, salt)
    if key not in _LARGE:
        t = random_values(name, shape, seeded("large", *key))
        _LARGE[key] = (t, numpy_of(t))
    return _LARGE[key]


def tensor_operand(name, shape, layout, gen, salt=0):
    """An operand of the given dtype, shape and layout; bases above the grain come from a cache
    (salt tells the operands of one call apart), the others from gen."""
    shape = tuple(shape)
    base_shape, view = LAYOUTS[layout]
    bshape = tuple(base_shape(shape))
    if math.prod(bshape) >= GRAIN:
        t, arr = _large_base(name, bshape, salt)
        tbase, kbase = t.clone(), kael.tensor(arr, dtype=kdt(name))
    else:
        tbase = random_values(name, bshape, gen)
        kbase = to_kael(tbase)
    t, k = view(tbase, shape), view(kbase, shape)
    assert tuple(t.shape) == shape and k.shape == shape
    if layout != "contiguous" and t.numel() > 1:
        assert not t.is_contiguous() and not k.is_contiguous(), (layout, shape)
    return Operand(t, k, tbase, kbase, f"{layout}{shape}")


def number_operand(value):
    return Operand(value, value, label=repr(value))


def overlaps_internally(t):
    return t.numel() > 0 and any(s == 0 and n > 1 for s, n in zip(t.stride(), t.shape))


# ---------------------------------------------------------------- the two implementations

def _takes_numbers_error(e):
    return isinstance(e, TypeError) and ("must be Tensor" in str(e) or "invalid combination" in str(e))


def _combine_categories(higher, lower):
    """torch's combine_categories (aten/src/ATen/native/TypeProperties.cpp), without complex."""
    if higher is not None and higher.is_floating_point:
        return higher
    if higher is torch.bool or (lower is not None and lower.is_floating_point):
        return lower if higher is None else (higher if lower is None else torch.promote_types(higher, lower))
    return higher if higher is not None else lower


def result_type(targs):
    """torch's promoted dtype of the inputs (Python numbers as wrapped numbers): torch's
    ResultTypeState over any number of operands (torch.result_type takes two)."""
    if len(targs) == 1:
        return targs[0].dtype
    if len(targs) == 2:
        return torch.result_type(*targs)
    state = {"dim": None, "zero": None, "wrapped": None}
    for a in targs:
        if isinstance(a, torch.Tensor):
            key, dt = ("dim" if a.dim() > 0 else "zero"), a.dtype
        elif isinstance(a, (bool, int, float)):
            key = "wrapped"
            dt = torch.bool if isinstance(a, bool) else torch.int64 if isinstance(a, int) else torch.get_default_dtype()
        else:  # as torch.result_type: a list, a complex number, None... is no operand it promotes
            raise TypeError(f"result_type: {type(a).__name__} is not a tensor or a real number")
        state[key] = dt if state[key] is None else torch.promote_types(state[key], dt)
    return _combine_categories(state["dim"], _combine_categories(state["zero"], state["wrapped"]))


def _wrapped_number(a, dtype):
    """A number as torch's TensorIterator reads a wrapped number: cast to the compute dtype
    without a range check (int16 tensor + -2**31 adds 0, as the cast wraps); torch.tensor(a,
    dtype=) would raise for an integer out of the dtype's range."""
    try:
        return torch.tensor(a, dtype=dtype)
    except RuntimeError as e:
        if "cannot be converted" not in str(e):
            raise
        return torch.tensor(a).to(dtype)


class TorchOp:
    """The oracle: torch's op of the entry's name, with torch's in-place and out= rules applied
    to torch's function where torch lacks that variant."""

    def __init__(self, f):
        assert hasattr(torch, f.name), f"torch.{f.name} does not exist: compare {f.name} by hand"
        self.f = f
        self.fn = getattr(torch, f.name)

    def _wrapped(self, targs, method=False):
        """Numbers as 0-d tensors of the dtype the op computes in (the promoted dtype, float32 for
        an int_to_float op on integers): what torch computes with wrapped numbers, which are
        cast to that dtype (atan2(-3, uint8 tensor) computes with -3.0, not with 253)."""
        if self.f.name == "where":
            # where's condition (first; second in the method's arguments, after self) takes no
            # part in promotion and is never wrapped: torch refuses a number there, as kael does
            c = 1 if method else 0
            rest = self._wrapped_values([a for i, a in enumerate(targs) if i != c])
            return rest[:c] + [targs[c]] + rest[c:]
        return self._wrapped_values(targs)

    def _wrapped_values(self, targs):
        r = result_type(targs)
        if self.f.promotion == "int_to_float" and not r.is_floating_point:
            r = torch.get_default_dtype()
        return [a if isinstance(a, torch.Tensor) else _wrapped_number(a, r) for a in targs]

    def function(self, targs, kw):
        try:
            return self.fn(*targs, **kw)
        except TypeError as e:
            if not _takes_numbers_error(e) or all(isinstance(a, torch.Tensor) for a in targs):
                raise
        return self.fn(*self._wrapped(targs), **kw)

    def method(self, targs, kw):
        try:
            return getattr(targs[0], self.f.name)(*targs[1:], **kw)
        except TypeError as e:
            if not _takes_numbers_error(e):
                raise
        return getattr(targs[0], self.f.name)(*self._wrapped(targs, method=True)[1:], **kw)

    def inplace(self, targs, kw):
        self_ = targs[0]
        if hasattr(torch.Tensor, self.f.name + "_"):
            try:
                return getattr(self_, self.f.name + "_")(*targs[1:], **kw)
            except TypeError as e:
                if not _takes_numbers_error(e):
                    raise
            return getattr(self_, self.f.name + "_")(*self._wrapped(targs)[1:], **kw)
        expected = self.function(targs, kw)
        if not torch.can_cast(expected.dtype, self_.dtype):
            raise RuntimeError(f"result type {expected.dtype} can't be cast to the desired output type {self_.dtype}")
        if expected.shape != self_.shape:
            raise RuntimeError(f"output with shape {list(self_.shape)} doesn't match the broadcast shape "
                               f"{list(expected.shape)}")
        if overlaps_internally(self_):
            raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to "
                               "a single memory location")
        return self_.copy_(expected)

    def out(self, targs, kw, out):
        try:
            return self.fn(*targs, out=out, **kw)
        except TypeError as e:
            if _takes_numbers_error(e) and not all(isinstance(a, torch.Tensor) for a in targs):
                return self.out(self._wrapped(targs), kw, out)
            if "unexpected keyword argument 'out'" not in str(e):
                raise
        except RuntimeError as e:
            # torch.abs and torch.neg take only an out of the input's dtype ("Found dtype Double but
            # expected Float"), torch.where one of the result's ("Expected out type to be Double but
            # got Float"); every other op, and kael throughout, casts to any out dtype the result
            # can be cast to. Those follow the general rule below.
            if not re.match(r"Found dtype \w+ but expected \w+|Expected out type to be \w+ but got \w+", str(e)):
                raise
        expected = self.function(targs, kw)
        if not torch.can_cast(expected.dtype, out.dtype):
            raise RuntimeError(f"result type {expected.dtype} can't be cast to the desired output type {out.dtype}")
        # torch's out= rules for the write, from one of its own out= ops that changes no value
        # (x * True keeps x's dtype and -0.0): an out that must be resized is restrided in the
        # result's layout (which is the inputs'), as every torch op with out= does (out.resize_
        # would make it row-major); the overlap check is torch's own.
        return torch.mul(expected, True, out=out)

    def layout(self, targs, kw):
        """The result of the function with numbers as 0-d tensors: the layout torch's
        TensorIterator gives. (Not for pow with a number as self, whose result is contiguous in
        both: run_case compares it with torch's own result.)"""
        return self.fn(*self._wrapped(targs), **kw)


class KaelOp:
    """How the harness calls kael: its Python spellings of the entry. The tests of the tests
    replace it with wrong implementations."""

    def __init__(self, f):
        self.f = f
        self.name = f.name

    def function(self, *args, **kw):
        return getattr(kael, self.name)(*args, **kw)

    def method(self, self_, *args, **kw):
        return getattr(self_, self.name)(*args, **kw)

    def inplace(self, self_, *args, **kw):
        return getattr(self_, self.name + "_")(*args, **kw)

    def out(self, *args, out, **kw):
        return getattr(kael, self.name)(*args, out=out, **kw)


def variants_of(f):
    """The Python spellings the entry has."""
    out = []
    if "function" in f.variants:
        out.append("function")
    if "method" in f.variants:
        out.append("method")
        if f.inplace:
            out.append("inplace")
    if "function" in f.variants:
        out.append("out")
    return out


def compute_dtype(f, targs):
    """The dtype the kernel computes in (promotion, then int_to_float), as kael defines it."""
    r = result_type(targs)
    if f.promotion == "int_to_float" and not r.is_floating_point:
        r = torch.get_default_dtype()
    return dtype_name(r)


def result_dtype(f, targs):
    return "bool" if f.promotion == "always_bool" else compute_dtype(f, targs)


# ---------------------------------------------------------------- one call, compared

# kael's calls run on at least two threads, so sizes above the grain run in parallel.
KAEL_THREADS = max(2, kael.get_num_threads())


def _kael_call(fn):
    kael.set_num_threads(KAEL_THREADS)
    try:
        return _call(fn)
    finally:
        torch.set_num_threads(1)


def _call(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            res, err = fn(), None
        except Exception as e:  # noqa: BLE001 - compared with the other library's outcome
            res, err = None, e
    return res, err, sorted({w.category.__name__ for w in caught})


@dataclass
class Case:
    """One call of one variant: operands (the first is self for method and in-place calls),
    the Scalar arguments, and the out tensor of an out= call."""
    variant: str
    operands: list
    kwargs: dict = field(default_factory=dict)
    out: Operand | None = None

    def __str__(self):
        args = ", ".join(o.label for o in self.operands)
        kw = "".join(f", {k}={v!r}" for k, v in self.kwargs.items())
        out = f", out={self.out.label}" if self.out is not None else ""
        return f"{self.variant}({args}{kw}{out})"


def _expected_class(terr):
    """The exception class kael must raise where torch raises terr."""
    if isinstance(terr, NotImplementedError):
        return RuntimeError  # torch's "not implemented for 'Bool'"; kael's dtype errors are RuntimeErrors
    return type(terr)  # shape errors included: RuntimeError, as torch's


def _state(case):
    """(label, kael tensor, torch tensor) of every tensor the call was given: the bases of the
    inputs, out and out's base."""
    out = []
    for i, o in enumerate(case.operands):
        if o.is_tensor:
            out.append((f"base of input {i}", o.kbase, o.tbase))
    if case.out is not None:
        out.append(("out", case.out.k, case.out.t))
        if case.out.tbase is not None:
            out.append(("base of out", case.out.kbase, case.out.tbase))
    return out


def run_case(f, kop, case, torch_op=None):
    """Runs the case on torch and on kop; asserts kael does what torch does (see module doc)."""
    top = torch_op or TorchOp(f)
    targs = [o.t for o in case.operands]
    kargs = [o.k for o in case.operands]
    kw = case.kwargs
    v = case.variant
    where = f"{f.name} {case}"
    before = [(label, t.clone(), t.stride()) for label, _, t in _state(case)]
    fd_ref = None
    if f.name == "floor_divide" and compute_dtype(f, targs) in ("float16", "bfloat16"):
        # torch's vectorised float16/bfloat16 floor_divide is off by one in places (-1643.56 //
        # -0.0921 floors to -1645 in a longer tensor, to -1644 alone); the reference is its
        # float32 quotient rounded once, as its scalar path and kael compute it (taken before an
        # in-place variant changes the inputs)
        half = getattr(torch, compute_dtype(f, targs))
        wide = [a.to(half).float() if isinstance(a, torch.Tensor) else a for a in targs]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                fd_ref = torch.floor_divide(*wide)
            except Exception:  # noqa: BLE001 - torch's own call below reports the error
                fd_ref = None
    if v == "function":
        tres, terr, twarn = _call(lambda: top.function(targs, kw))
        kres, kerr, kwarn = _kael_call(lambda: kop.function(*kargs, **kw))
    elif v == "method":
        tres, terr, twarn = _call(lambda: top.method(targs, kw))
        kres, kerr, kwarn = _kael_call(lambda: kop.method(*kargs, **kw))
    elif v == "inplace":
        tres, terr, twarn = _call(lambda: top.inplace(targs, kw))
        kres, kerr, kwarn = _kael_call(lambda: kop.inplace(*kargs, **kw))
    elif v == "out":
        tres, terr, twarn = _call(lambda: top.out(targs, kw, case.out.t))
        kres, kerr, kwarn = _kael_call(lambda: kop.out(*kargs, out=case.out.k, **kw))
    else:
        raise ValueError(v)

    compute = compute_dtype(f, targs)
    excluded = compute not in f.dtypes
    if fd_ref is not None and terr is None and tres is not None:
        if v in ("inplace", "out"):
            tres.copy_(fd_ref)  # torch's written tensor (and its base) hold the reference
        else:
            tres = torch.empty_strided(tres.shape, tres.stride(), dtype=tres.dtype).copy_(fd_ref)
    if excluded:
        assert kerr is not None, (f"{where}: computes in {compute}, which the entry's dtypes leave out, "
                                  f"but kael did not raise")
        assert isinstance(kerr, (RuntimeError, TypeError, ValueError)), f"{where}: {type(kerr).__name__}: {kerr}"
        if terr is None:
            assert isinstance(kerr, RuntimeError) and f"{f.name}: not implemented for dtype {compute}" in str(kerr), (
                f"{where}: torch computes; kael must say '{f.name}: not implemented for dtype {compute}', "
                f"got {type(kerr).__name__}: {kerr}")
    elif terr is not None:
        assert kerr is not None, (f"{where}: torch raises {type(terr).__name__}: {terr}\n"
                                  f"but kael returned {kres!r}")
        assert isinstance(kerr, _expected_class(terr)), (f"{where}: torch raises {type(terr).__name__}: {terr}\n"
                                                         f"kael raises {type(kerr).__name__}: {kerr}")
    else:
        if kerr is not None:
            raise AssertionError(f"{where}: torch computes {tres.dtype} {tuple(tres.shape)}, kael raises "
                                 f"{type(kerr).__name__}: {kerr}") from kerr
        assert twarn == kwarn, f"{where}: warnings {kwarn} != torch {twarn}"
        if v == "inplace":
            assert kres is kargs[0], f"{where}: the in-place variant must return self"
        elif v == "out":
            assert kres is case.out.k, f"{where}: the out= variant must return out"
        else:
            assert all(kres is not a for a in kargs), f"{where}: returned an input instead of a new tensor"
        layout = None
        if v in ("function", "method") and any(not o.is_tensor for o in case.operands) and not (
                f.name == "pow" and not case.operands[0].is_tensor):
            try:
                layout = top.layout(targs, kw)
            except RuntimeError:  # torch.pow(bool tensor, True) computes; with tensor(True), it raises
                layout = None
        # new results take the layout of the inputs; in-place and out= keep the destination's
        check_tensor(kres, tres, f"{where}: result", layout=layout, computed_in=result_dtype(f, targs))
    # What the call left in every tensor it was given: what torch left, or, after a failed call,
    # what they held before (every check comes before the first write; torch itself resizes
    # out= before some of its dtype checks).
    for (label, k, t), (_, t0, stride0) in zip(_state(case), before):
        if kerr is not None:
            check_tensor(k, t0, f"{where}: {label} after the failed call", layout=torch.empty_strided(
                t0.shape, stride0))
        else:
            check_tensor(k, t, f"{where}: {label} afterwards", computed_in=result_dtype(f, targs))


# ---------------------------------------------------------------- building cases

def scalar_params(f):
    return [p for p in f.schema.params if p.type.base == "Scalar"]


def n_inputs(f):
    return len(f.schema.tensor_params)


def required_scalars(f):
    """Values for Scalar arguments without a default (keywords, as torch takes them)."""
    return {p.name: 2 for p in scalar_params(f) if not p.has_default}


def out_operand(name, shape, gen, layout="contiguous"):
    return tensor_operand(name, shape, layout, gen)


def broadcast_shape(operands):
    shapes = [tuple(o.t.shape) for o in operands if o.is_tensor]
    try:
        return tuple(torch.broadcast_shapes(*shapes))
    except RuntimeError:
        return None


def cases_for(f, make_operands, variants=None, kwargs=None, out_dtype=None, gen=None):
    """A case for every variant of the entry, each on fresh operands (in-place calls write).

    make_operands() builds the operands; the out tensor of out= has the result dtype (or
    out_dtype) and the broadcast shape (or (2,) when the shapes do not broadcast)."""
    kwargs = dict(required_scalars(f), **(kwargs or {}))
    for v in variants or variants_of(f):
        ops = make_operands()
        if v in ("method", "inplace") and not ops[0].is_tensor:
            continue
        out = None
        if v == "out":
            shape = broadcast_shape(ops)
            shape = (2,) if shape is None else shape
            out = out_operand(out_dtype or result_dtype(f, [o.t for o in ops]), shape, gen or seeded(f.name, "out"))
        yield Case(v, ops, kwargs, out)


def each_dtype(entries):
    """(entry, dtype) parameters: every entry with every dtype."""
    return [pytest.param(f, d, id=f"{f.name}-{d}") for f in entries for d in DTYPES]


UNARY_LAYOUTS = [
    ("contiguous", (5, 6)), ("transposed", (5, 6)), ("step-sliced", (5, 6)), ("expanded", (5, 6)),
    ("transposed", (2, 3, 4)), ("step-sliced", (7,)), ("contiguous", ()), ("contiguous", (0, 6)),
    ("transposed", (6, 0)), ("contiguous", BIG), ("transposed", BIG),
]

# (layout, shape) of each input of a two-input op.
BINARY_LAYOUTS = (
    [((lay, (5, 6)), ("contiguous", (5, 6))) for lay in LAYOUTS]
    + [(("contiguous", (5, 6)), (lay, (5, 6))) for lay in LAYOUTS if lay != "contiguous"]
    + [(("transposed", (2, 3, 4)), ("step-sliced", (2, 3, 4))),
       (("contiguous", (5, 6)), ("step-sliced", (6,))),        # broadcast
       (("contiguous", (5, 1)), ("contiguous", (1, 6))),       # broadcast both; in-place cannot
       (("contiguous", (6,)), ("transposed", (5, 6))),         # self smaller than the result
       (("contiguous", (5, 6)), ("contiguous", (4,))),         # not broadcastable
       (("contiguous", ()), ("contiguous", ())),
       (("contiguous", (5, 6)), ("contiguous", ())),           # 0-d operands
       (("contiguous", ()), ("transposed", (5, 6))),
       (("contiguous", (0, 6)), ("contiguous", (0, 6))),       # empty
       (("contiguous", (0, 6)), ("contiguous", (6,))),
       (("contiguous", BIG), ("contiguous", BIG)),             # above the threading grain
       (("transposed", BIG), ("step-sliced", BIG[-1:]))]
)


def layout_cases(f, dtype):
    """Every layout case of the entry for inputs of one dtype, each with every variant (above the
    grain, the method spelling is left out: it binds to the same call as the function)."""
    layouts = [(lay,) for lay in UNARY_LAYOUTS] if n_inputs(f) == 1 else BINARY_LAYOUTS
    for spec in layouts:
        gen = seeded(f.name, dtype, spec)
        large = any(shape == BIG for _, shape in spec)
        variants = [v for v in variants_of(f) if not (large and v == "method")]
        yield from cases_for(f, lambda: [tensor_operand(dtype, shape, lay, gen, salt=i)
                                         for i, (lay, shape) in enumerate(spec)], variants=variants, gen=gen)


@pytest.fixture(scope="module", autouse=True)
def _threads():
    """torch computes on one thread: its results do not depend on the count, and its copies above
    the grain wait for their threads, slowly on a busy machine. kael's calls run on
    KAEL_THREADS (see _kael_call), on kael's own thread pool."""
    kael_before, torch_before = kael.get_num_threads(), torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(torch_before)
    kael.set_num_threads(kael_before)


# ---------------------------------------------------------------- the tests

def test_registry_has_pointwise_entries_and_torch_has_their_names():
    assert len(POINTWISE) >= 20
    missing = [f.name for f in POINTWISE if not hasattr(torch, f.name)]
    assert not missing, f"no torch op of the same name for {missing}: compare them by hand"


def test_entries_left_out_are_tested_by_hand():
    pointwise = {f.name for f in REGISTRY if f.is_pointwise}
    assert set(BY_HAND) <= pointwise, sorted(set(BY_HAND) - pointwise)
    for name, test_file in BY_HAND.items():
        f = next(f for f in REGISTRY if f.name == name)
        assert len(f.schema.tensor_params) == 3 or not f.variants or name in kael._FUNCTIONAL_ONLY \
            or name.startswith("_"), f"{name} could be driven by this harness"
        text = (Path(__file__).parent / test_file).read_text()
        public = name.lstrip("_").replace("_grad", "").replace("_tanh", "")
        assert public in text, f"{test_file} does not test {name}"


def test_the_dtypes_are_kael_and_torch_dtypes():
    for name in DTYPES:
        assert dtype_name(kdt(name)) == name and dtype_name(tdt(name)) == name


@pytest.mark.parametrize("f,dtype", each_dtype(POINTWISE))
def test_layouts_and_variants(f, dtype):
    for case in layout_cases(f, dtype):
        run_case(f, KaelOp(f), case)


@pytest.mark.parametrize("f,dtype", each_dtype(POINTWISE))
def test_special_values(f, dtype):
    """Every special value; for two inputs, every pair of them."""
    vals = specials(dtype)
    if n_inputs(f) == 1:
        columns = [vals]
    else:
        columns = [[x for x in vals for _ in vals], [y for _ in vals for y in vals]]

    def make():
        ops = []
        for c in columns:
            t = torch.tensor(c, dtype=tdt(dtype))
            k = to_kael(t)
            ops.append(Operand(t, k, t, k, f"specials({dtype})"))
        return ops

    for case in cases_for(f, make):
        run_case(f, KaelOp(f), case)


BINARY = [f for f in POINTWISE if n_inputs(f) == 2]


@pytest.mark.parametrize("f", [pytest.param(f, id=f.name) for f in BINARY])
def test_every_pair_of_dtypes(f):
    for da in DTYPES:
        for db in DTYPES:
            gen = seeded(f.name, da, db)
            for case in cases_for(f, lambda: [tensor_operand(da, (4, 5), "contiguous", gen),
                                              tensor_operand(db, (5,), "contiguous", gen)], gen=gen):
                run_case(f, KaelOp(f), case)


NUMBERS = [0, 2, -3, 2.5, -0.5, True, False, math.inf, -math.inf, math.nan]


# heaviside takes two tensors of one dtype, as torch's (a number is a TypeError: test_composites.py)
NUMBERS_TAKEN = [f for f in BINARY if f.name != "heaviside"]


@pytest.mark.parametrize("f,dtype", each_dtype(NUMBERS_TAKEN))
def test_python_numbers_for_either_input(f, dtype):
    for number in NUMBERS:
        for position in (0, 1):
            gen = seeded(f.name, dtype, number, position)

            def make():
                ops = [tensor_operand(dtype, (3, 4), "transposed", gen)]
                ops.insert(position, number_operand(number))
                return ops
            for case in cases_for(f, make, gen=gen):
                run_case(f, KaelOp(f), case)


WITH_SCALARS = [f for f in POINTWISE if scalar_params(f)]
SCALAR_VALUES = [2, -1, 0, 1.5, -0.25, True, False]


@pytest.mark.parametrize("f,dtype", each_dtype(WITH_SCALARS))
def test_scalar_arguments(f, dtype):
    for p in scalar_params(f):
        for value in SCALAR_VALUES:
            gen = seeded(f.name, dtype, p.name, value)
            make = (lambda: [tensor_operand(dtype, (3, 4), "step-sliced", gen)]
                    + [tensor_operand(dtype, (4,), "contiguous", gen)] * (n_inputs(f) - 1))
            for case in cases_for(f, make, kwargs={p.name: value}, gen=gen):
                run_case(f, KaelOp(f), case)


WITH_OUT = [f for f in POINTWISE if "out" in variants_of(f)]


def _inputs(f, dtype, gen):
    return [tensor_operand(dtype, (3, 4), "contiguous", gen) for _ in range(n_inputs(f))]


@pytest.mark.parametrize("f,dtype", each_dtype(WITH_OUT))
def test_out_argument(f, dtype):
    """out= of every dtype, of another shape (resized, with a warning if it had elements),
    strided, and aliasing an input."""
    gen = seeded(f.name, dtype, "out")
    ops = _inputs(f, dtype, gen)
    rdt = result_dtype(f, [o.t for o in ops])
    outs = [out_operand(d, (3, 4), gen) for d in DTYPES]
    outs += [out_operand(rdt, (0,), gen), out_operand(rdt, (2,), gen), out_operand(rdt, (2, 3, 4), gen),
             out_operand(rdt, (3, 4), gen, "transposed"), out_operand(rdt, (3, 4), gen, "step-sliced"),
             out_operand(rdt, (3, 4), gen, "expanded")]
    for out in outs:
        run_case(f, KaelOp(f), Case("out", _inputs(f, dtype, gen), required_scalars(f), out))
    for i in range(n_inputs(f)):  # out is one of the inputs
        ops = _inputs(f, dtype, gen)
        alias = Operand(ops[i].t, ops[i].k, ops[i].tbase, ops[i].kbase, f"input {i}")
        run_case(f, KaelOp(f), Case("out", ops, required_scalars(f), alias))


def _uncastable_out(f):
    """(input dtype, out dtype) where the result cannot be cast to out, if the entry has one."""
    for d in f.dtypes:
        rdt = tdt("bool" if f.promotion == "always_bool" else d)
        for o in DTYPES:
            if not torch.can_cast(rdt, tdt(o)):
                return d, o
    return None


UNCASTABLE = [pytest.param(f, *_uncastable_out(f), id=f.name) for f in WITH_OUT if _uncastable_out(f)]


@pytest.mark.parametrize("f,dtype,out_dtype", UNCASTABLE)
def test_failed_out_call_leaves_out_untouched(f, dtype, out_dtype):
    gen = seeded(f.name, "uncastable")
    run_case(f, KaelOp(f), Case("out", _inputs(f, dtype, gen), required_scalars(f),
                                out_operand(out_dtype, (2,), gen)))



# ---------------------------------------------------------------- the tests of the tests
# Wrong implementations must fail the harness above: a wrong formula in every variant, and one
# mistake per thing the harness compares, each next to a case the same mistake passes.

def _fails(f, kop, case, fragment):
    """run_case must report a mismatch whose message contains fragment."""
    with pytest.raises(AssertionError) as info:
        run_case(f, kop, case)
    assert fragment in str(info.value), str(info.value)


def _case(f, dtype, variant, spec, kwargs=None):
    """The first case of the variant with inputs given by spec [(layout, shape), ...]."""
    gen = seeded("mutant", f.name, dtype, variant, spec)
    make = lambda: [tensor_operand(dtype, shape, lay, gen, salt=i) for i, (lay, shape) in enumerate(spec)]  # noqa
    return next(cases_for(f, make, variants=[variant], kwargs=kwargs, gen=gen))


def _special_case(f, dtype, variant):
    t = torch.tensor(specials(dtype), dtype=tdt(dtype))
    k = to_kael(t)
    return Case(variant, [Operand(t, k, t, k, "specials")], {},
                out_operand(result_dtype(f, [t]), tuple(t.shape), seeded("mutant-out")) if variant == "out" else None)


class WrongFormula(KaelOp):
    """log1p computed as expm1(abs(a)), through kael's own ops in every variant."""

    def function(self, x, **kw):
        return kael.sub(kael.exp(kael.abs(x)), 1, **kw)

    def method(self, x):
        return x.abs().exp().sub(1)

    def inplace(self, x):
        return x.abs_().exp_().sub_(1)

    def out(self, x, out):
        return self.function(x, out=out)


@pytest.mark.parametrize("variant", ["function", "method", "inplace", "out"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_wrong_formula_fails_in_every_variant(variant, dtype):
    f = BY_NAME["log1p"]
    wrong = WrongFormula(f)
    for spec in ([("contiguous", (5, 6))], [("transposed", (5, 6))], [("contiguous", BIG)]):
        _fails(f, wrong, _case(f, dtype, variant, spec), "values differ from torch")
    _fails(f, wrong, _special_case(f, dtype, variant), "values differ from torch")
    for spec in ([("contiguous", (5, 6))], [("transposed", (5, 6))], [("contiguous", BIG)]):
        run_case(f, KaelOp(f), _case(f, dtype, variant, spec))  # the real log1p passes the same cases


class NaNToZero(KaelOp):
    """Correct except that NaN results become 0."""

    def function(self, *args, **kw):
        r = super().function(*args, **kw)
        return to_kael(torch.nan_to_num(to_torch(r), nan=0.0)) if r.dtype.is_floating_point else r


class WrongAboveTheGrain(KaelOp):
    """Correct below the threading grain; one element off above it."""

    def function(self, *args, **kw):
        r = super().function(*args, **kw)
        if r.numel() < GRAIN:
            return r
        t = to_torch(r)
        t.view(-1)[-1] += 1
        return to_kael(t)


class ContiguousResult(KaelOp):
    """Right values, but always a contiguous result (torch keeps the inputs' layout)."""

    def function(self, *args, **kw):
        return to_kael(to_torch(super().function(*args, **kw)))


class InplaceReturnsACopy(KaelOp):
    def inplace(self, *args, **kw):
        return kael.clone(super().inplace(*args, **kw))


class OutReturnsANewTensor(KaelOp):
    def out(self, *args, out, **kw):
        super().out(*args, out=out, **kw)
        return kael.clone(out)


class RaisesForInt64(KaelOp):
    def function(self, *args, **kw):
        if any(isinstance(a, kael.Tensor) and a.dtype is kael.int64 for a in args):
            raise RuntimeError("not implemented for int64")
        return super().function(*args, **kw)


class ComputesExcludedBool(KaelOp):
    """sub of two bool tensors (the entry leaves bool out; torch raises) computed as a != b."""

    def function(self, a, b, **kw):
        if a.dtype is kael.bool and b.dtype is kael.bool:
            return kael.ne(a, b)
        return super().function(a, b, **kw)


class WritesOutOnFailure(KaelOp):
    """out= that resizes out before a check fails."""

    def out(self, *args, out, **kw):
        kael.add(kael.zeros(3, 4, dtype=out.dtype), 0, out=out)
        return super().out(*args, out=out, **kw)


class WrongErrorClass(KaelOp):
    def function(self, *args, **kw):
        try:
            return super().function(*args, **kw)
        except (RuntimeError, ValueError) as e:
            raise TypeError(str(e)) from None


C56, C34 = [("contiguous", (5, 6))], [("contiguous", (3, 4))]

MUTANTS = [
    # (mutant, op, a case it fails, a case it passes, what the failure says)
    (NaNToZero, "exp", lambda f: _special_case(f, "float32", "function"),
     lambda f: _case(f, "int64", "function", C56), "values differ"),
    (WrongAboveTheGrain, "add", lambda f: _case(f, "float32", "function", [("contiguous", BIG)] * 2),
     lambda f: _case(f, "float32", "function", C56 * 2), "values differ"),
    (WrongAboveTheGrain, "exp", lambda f: _case(f, "float64", "function", [("transposed", BIG)]),
     lambda f: _case(f, "float64", "function", [("transposed", (5, 6))]), "values differ"),
    (ContiguousResult, "mul", lambda f: _case(f, "int64", "function", [("transposed", (5, 6))] * 2),
     lambda f: _case(f, "int64", "function", [("step-sliced", (5, 6))] * 2), "strides"),
    (InplaceReturnsACopy, "mul", lambda f: _case(f, "float32", "inplace", [("step-sliced", (5, 6))] * 2),
     lambda f: _case(f, "float32", "function", [("step-sliced", (5, 6))] * 2), "must return self"),
    (OutReturnsANewTensor, "neg", lambda f: _case(f, "int64", "out", C56),
     lambda f: _case(f, "int64", "function", C56), "must return out"),
    (RaisesForInt64, "maximum", lambda f: _case(f, "int64", "function", C56 * 2),
     lambda f: _case(f, "float32", "function", C56 * 2), "kael raises"),
    (ComputesExcludedBool, "sub", lambda f: _case(f, "bool", "function", C56 * 2),
     lambda f: _case(f, "int64", "function", C56 * 2), "did not raise"),
    (WritesOutOnFailure, "exp", lambda f: Case("out", _inputs(f, "float32", seeded("m")), {},
                                               out_operand("int64", (2,), seeded("m"))),
     lambda f: _case(f, "float32", "out", C34), "after the failed call"),
    (WrongErrorClass, "add", lambda f: _case(f, "float32", "function", C56 + [("contiguous", (4,))]),
     lambda f: _case(f, "float32", "function", C56 * 2), "kael raises TypeError"),
]


@pytest.mark.parametrize("mutant,op,failing,passing,fragment", MUTANTS,
                         ids=[f"{m[0].__name__}-{m[1]}" for m in MUTANTS])
def test_a_wrong_implementation_fails(mutant, op, failing, passing, fragment):
    f = BY_NAME[op]
    _fails(f, mutant(f), failing(f), fragment)
    run_case(f, mutant(f), passing(f))


# ---------------------------------------------------------------- end to end
# The same proof with the real pipeline: log1p's formula changed in a copy of the registry,
# codegen run on it, the one kernel recompiled with the build's own command, the extension
# relinked in a temporary directory; these tests then fail for log1p and pass for exp (which
# the edit leaves alone). About ten seconds: one kernel, one link, one pytest run.

WRONG_FORMULA = "exp(abs(a)) - T(1)"  # expm1(abs(a)), with the helpers of kael's math.h


def _build_tree():
    """The developer build tree that made the extension being tested, or None."""
    so = Path(kael._C.__file__)
    for tree in sorted((ROOT / "build").glob("*/")):
        built = tree / so.name
        if (tree / "compile_commands.json").is_file() and built.is_file() and \
                built.read_bytes() == so.read_bytes():
            return tree
    return None


def _cmake_cache(tree, key):
    m = re.search(rf"^{key}:[A-Z]+=(.*)$", (tree / "CMakeCache.txt").read_text(), re.M)
    assert m, f"{key} missing from {tree}/CMakeCache.txt"
    return m.group(1)


def _run(cmd, cwd, what):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    assert r.returncode == 0, f"{what} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def _registry_with_formula(name, formula):
    """native_functions.yaml with the `pointwise:` formula of one entry replaced (and its `simd:`
    mark dropped: a SIMD form belongs to the formula it replaces)."""
    lines = (ROOT / "native_functions.yaml").read_text().splitlines(keepends=True)
    i = BY_NAME[name].line - 1
    while not lines[i].lstrip().startswith("pointwise:"):
        i += 1
    indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
    lines[i] = f"{indent}pointwise: {formula}\n"
    end = i + 1
    while end < len(lines) and not lines[end].startswith("- func:"):
        end += 1
    lines[i + 1:end] = [line for line in lines[i + 1:end] if line.strip() != "simd: true"]
    text = "".join(lines)
    assert {f.name: f for f in parse_registry(text)}[name].pointwise == formula
    return text


def test_a_wrong_formula_in_the_registry_fails_these_tests(tmp_path):
    tree = _build_tree()
    if tree is None:
        pytest.skip("needs the developer build tree (build/<tag>) of the extension under test")
    so = Path(kael._C.__file__)
    # codegen on the edited registry
    yaml_path = tmp_path / "native_functions.yaml"
    yaml_path.write_text(_registry_with_formula("log1p", WRONG_FORMULA))
    generated = tmp_path / "generated"
    _run([sys.executable, "-m", "codegen.gen", "--yaml", str(yaml_path), "--out", str(generated)], ROOT, "codegen")
    kernel = generated / "src" / "pointwise" / "log1p.cpp"
    assert WRONG_FORMULA in kernel.read_text()
    # the kernel, compiled with its command from the build tree
    commands = json.loads((tree / "compile_commands.json").read_text())
    real = tree / "generated" / "src" / "pointwise" / "log1p.cpp"
    entry = next((c for c in commands if Path(c["file"]) == real), None)
    assert entry is not None, f"no compile command for {real}"
    obj_name = Path(entry["output"]).name
    args = shlex.split(entry["command"])
    args = [str(kernel) if a == str(real) else a.replace(str(tree / "generated"), str(generated)) for a in args]
    args[args.index("-o") + 1] = str(tmp_path / obj_name)
    _run(args, entry["directory"], "compiling the edited kernel")
    # the link command of the extension, with the archive that holds the kernel swapped for a copy
    ninja = _cmake_cache(tree, "CMAKE_MAKE_PROGRAM")
    ar = _cmake_cache(tree, "CMAKE_AR")
    link_line = _run([ninja, "-C", str(tree), "-t", "commands", so.name], ROOT, "ninja -t commands").splitlines()[-1]
    link = shlex.split(next(part for part in link_line.split(" && ") if "-shared" in part))
    # a static library may stand twice in the line (CMake repeats the core after the libraries that
    # link it); each archive counts once, and every occurrence of the holder is swapped below
    archives = list(dict.fromkeys(a for a in link if a.endswith(".a") and (tree / a).is_file()))
    # (a thin archive, as the build makes them, lists its members' paths: compare their names)
    members = {a: _run([ar, "t", str(tree / a)], tree, "ar t").split() for a in archives}
    holder = [a for a in archives if obj_name in {Path(m).name for m in members[a]}]
    assert len(holder) == 1, f"{obj_name} should be in exactly one of {archives}"
    archive = tmp_path / Path(holder[0]).name
    if (tree / holder[0]).read_bytes()[:8] == b"!<thin>\n":
        # a new thin archive of the same members (paths relative to the archive's folder), the
        # edited kernel in place of the built one
        folder = (tree / holder[0]).parent
        paths = [str(tmp_path / obj_name) if Path(m).name == obj_name else str(folder / m)
                 for m in members[holder[0]]]
        _run([ar, "qcT", str(archive), *paths], tmp_path, "ar qcT")
    else:
        shutil.copyfile(tree / holder[0], archive)
        _run([ar, "r", str(archive), str(tmp_path / obj_name)], tmp_path, "ar r")
    pkg = tmp_path / "pkg"
    shutil.copytree(Path(kael.__file__).parent, pkg / "kael",
                    ignore=shutil.ignore_patterns("_C*.so", "_C*.pyd", "__pycache__"))
    link = [str(archive) if a == holder[0] else a for a in link]
    link[link.index("-o") + 1] = str(pkg / "kael" / so.name)
    _run(link, tree, "linking the extension")
    # these tests, run on the rebuilt package: log1p fails, exp passes
    here = Path(__file__).resolve()
    ids = [f"{here}::test_layouts_and_variants[log1p-float32]", f"{here}::test_special_values[log1p-float64]",
           f"{here}::test_layouts_and_variants[exp-float32]"]
    script = ("import sys, kael; assert kael.__file__.startswith(sys.argv[1]), kael.__file__; "
              "import pytest; sys.exit(pytest.main(sys.argv[2:]))")
    r = subprocess.run([sys.executable, "-c", script, str(pkg), *ids, "-q", "-p", "no:cacheprovider",
                        "--tb=line", "-W", "ignore", "-rf"], cwd=pkg, capture_output=True, text=True)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out[-3000:]
    failed = sorted(re.findall(r"^FAILED \S+::(\S+)", out, re.M))
    assert failed == ["test_layouts_and_variants[log1p-float32]", "test_special_values[log1p-float64]"], out[-3000:]
    assert "values differ from torch" in out and "2 failed, 1 passed" in out, out[-3000:]
