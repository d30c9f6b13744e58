"""Property-based fuzzing of every public entry point, with PyTorch as the oracle.

The properties (test_fuzz_ops.py: every registry op, generated from native_functions.yaml;
test_fuzz_inputs.py: kael.tensor, kael.frombuffer, indexing and the hand-written Tensor and
module functions; test_fuzz_pyobject.py: the Python Tensor object; test_fuzz_api.py:
safetensors, Module state dicts, the tokenizer, the data loader, autograd.grad/backward,
scatter_reduce_ and index_put_) throw hostile arguments at kael and at torch alike: wrong types, None,
objects whose __index__/__float__/__int__/__bool__/__len__/__iter__/__getitem__ raise or
return wrong types or extreme values, huge and negative sizes, NaN and inf where ints are
expected, deep and self-referencing nesting, foreign buffers, extreme values of every dtype,
empty, 0-d, non-contiguous and expanded tensors, out= aliasing an input. Each example is a
*recipe* (plain data, so hypothesis can shrink and print it) that is built once for torch and
once for kael, so an object with state (one that counts its calls) starts fresh on each side.

What every example asserts:
- kael raises only ordinary Python exceptions (never SystemError, which means a C function
  returned NULL without an error set or the reverse), or the hostile object's own exception;
- where torch computes, kael computes the same thing: shape, dtype and values (NaN equal to
  NaN, floats within helpers.DEFAULT_TOL), and leaves the same values in every tensor it was
  given; where torch raises, kael raises too (the class may differ where kael has not yet
  moved to torch's, docs/decisions/errors.md); where kael raises, the tensors it was given are unchanged
  (every check comes before the first write).
The differences from torch that are deliberate are listed in KNOWN_DIFFERENCES (each with its
entry in docs/decisions.md or docs/hardening.md).

Running: a crash must fail a test, not kill pytest, so in the normal test run the one test of
this file, test_fuzz_suite_in_subprocess, runs the property files in a child pytest
(KAEL_FUZZ_CHILD=1) and fails with the child's output (and the last example it started,
written to a file before each call) if anything fails or the child dies. The child uses the
hypothesis profile named by KAEL_FUZZ_PROFILE: "kael-ci" (the default: derandomized, a fixed
number of examples, no example database) or "kael-long" (tools/fuzz_long.py: at least 100,000
cases in all, a random seed that the script prints). KAEL_FUZZ_STATS names a JSON file the
child writes the number of cases run to.
"""
from __future__ import annotations

import atexit
import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import kael
from helpers import DEFAULT_TOL

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
IN_CHILD = os.environ.get("KAEL_FUZZ_CHILD") == "1"

# ---------------------------------------------------------------- hypothesis profiles

_COMMON = dict(deadline=None, database=None, print_blob=True,
               suppress_health_check=list(HealthCheck))
# Examples per property in the normal test run: the whole child run stays well under 60 s on
# one core (docs/hardening.md has the timing).
CI_EXAMPLES = 15
settings.register_profile("kael-ci", max_examples=CI_EXAMPLES, derandomize=True, **_COMMON)
# The long run: tools/fuzz_long.py sets KAEL_FUZZ_EXAMPLES so that all properties together run
# at least 100,000 cases; the seed comes from pytest's --hypothesis-seed (the script prints it).
settings.register_profile("kael-long", max_examples=int(os.environ.get("KAEL_FUZZ_EXAMPLES", "2000")),
                          derandomize=False, **_COMMON)
settings.load_profile(os.environ.get("KAEL_FUZZ_PROFILE", "kael-ci"))


def fuzz(test):
    """Decorator for a property: it exists only in the child run (see the module doc), so the
    normal run collects the wrapper test alone and never runs a property in-process."""
    return test if IN_CHILD else None


# ---------------------------------------------------------------- bookkeeping

CASES = {"total": 0}
_TRACE = os.environ.get("KAEL_FUZZ_TRACE")


def record_case(test_name, recipe):
    """Counts a case and, before it runs, writes it to KAEL_FUZZ_TRACE: if the process dies,
    the wrapper shows the example that killed it."""
    CASES["total"] += 1
    CASES[test_name] = CASES.get(test_name, 0) + 1
    if CASES["total"] % 500 == 0:
        _write_stats()  # so that a run that dies still tells how far it got
    if _TRACE:
        with open(_TRACE, os.environ.get("KAEL_FUZZ_TRACE_MODE", "w")) as f:
            f.write(f"{test_name}: {recipe!r}"[:20000] + "\n")


def _write_stats():
    path = os.environ.get("KAEL_FUZZ_STATS")
    if path and IN_CHILD:
        with open(path, "w") as f:
            json.dump(CASES, f)


atexit.register(_write_stats)


# ---------------------------------------------------------------- hostile objects

class Boom(Exception):
    """Raised by hostile objects; kael must let it through (or raise an ordinary error)."""


_HOSTILE_CLASSES = {}


def hostile(behaviours):
    """An instance of a class whose dunder methods behave as `behaviours` says: a tuple of
    (method name, ("ret", value) | ("raise",) | ("ret_self",)). Classes are cached by their
    behaviours, so equal recipes give instances of one class."""
    key = tuple(behaviours)
    cls = _HOSTILE_CLASSES.get(repr(key))
    if cls is None:
        ns = {}
        for name, how in key:
            if how[0] == "raise":
                def method(self, *a, _n=name):
                    raise Boom(_n)
            elif how[0] == "ret_self":
                def method(self, *a):
                    return self
            else:
                def method(self, *a, _v=how[1]):
                    return _v
            ns[name] = method
        ns["__repr__"] = lambda self, _k=key: f"Hostile{_k!r}"
        cls = type("Hostile", (), ns)
        _HOSTILE_CLASSES[repr(key)] = cls
    return cls()


class Seq:
    """A sequence that is not a list or a tuple, with hostile parts: `how` maps "__len__",
    "__getitem__" and "__iter__" to behaviours as in hostile(); the items are real."""

    def __init__(self, items, how):
        self.items = list(items)
        self.how = dict(how)

    def _do(self, name, default):
        how = self.how.get(name)
        if how is None:
            return default()
        if how[0] == "raise":
            raise Boom(name)
        return how[1]

    def __len__(self):
        return self._do("__len__", lambda: len(self.items))

    def __getitem__(self, i):
        return self._do("__getitem__", lambda: self.items[i])

    def __iter__(self):
        return self._do("__iter__", lambda: iter(self.items))

    def __repr__(self):
        return f"Seq({self.items!r}, {self.how!r})"


MUTATIONS_OF_LIST = ["clear", "append", "append_list", "extend_many", "shrink", "replace", "self", "pop_self"]


class Mutator:
    """A list element whose __float__ or __index__ (`method`) mutates `target`, the list it is
    in (or a list above it), then returns a number: the parser must re-read lengths after
    every call into Python and hold what it walks (docs/decisions/hostile-input.md)."""

    def __init__(self, target, how, method):
        self.target, self.how, self.method = target, how, method

    def _mutate(self):
        t, how = self.target, self.how
        if how == "clear":
            t.clear()
        elif how == "append":
            t.append(1.0)
        elif how == "append_list":
            t.append([1.0, 2.0])
        elif how == "extend_many":
            t.extend([2.0] * 1000)
        elif how == "shrink":
            del t[1:]
        elif how == "replace":
            t[:] = [[9.0] * 5, "x", None]
        elif how == "self":
            t.append(t)
        elif how == "pop_self":
            if self in t:
                t.remove(self)  # drops the last reference the list held

    def __repr__(self):
        return f"Mutator({self.how!r}, {self.method!r})"


class _FloatMutator(Mutator):
    def __float__(self):
        self._mutate()
        return 1.5


class _IndexMutator(Mutator):
    def __index__(self):
        self._mutate()
        return 2


def make_mutator(target, how, method):
    return (_FloatMutator if method == "__float__" else _IndexMutator)(target, how, method)


def has_kind(recipe, kind):
    """Whether a recipe holds a part of the given kind (at any depth)."""
    if not isinstance(recipe, tuple):
        return False
    if recipe and recipe[0] == kind:
        return True
    return any(has_kind(r, kind) for r in recipe)


# Bad results for dunders that must return a given type
WRONG_RETURNS = [None, "3", 2.5, float("nan"), float("inf"), 3, -1, 2 ** 63, -2 ** 63 - 1, 2 ** 64, True,
                 b"x", [1], (2,)]

# Python ints at and around every boundary
BIG_INTS = [2 ** 40, 2 ** 53 + 1, 2 ** 62, 2 ** 63 - 1, 2 ** 63, 2 ** 64, 10 ** 30,
            -2 ** 31, -2 ** 63, -2 ** 63 - 1, -2 ** 64]
SMALL_INTS = list(range(-3, 7))
SPECIAL_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.7, math.nan, math.inf, -math.inf, 5e-324, 1e-45,
                  1.17549435e-38, 65504.0, 3.4028234663852886e+38, 1.7976931348623157e+308, 1e300, 2.0 ** 63,
                  -2.0 ** 63, 2.0 ** 64, 1e18]


def behaviour(method):
    """A strategy for one dunder's behaviour."""
    return st.one_of(st.just(("raise",)), st.sampled_from(WRONG_RETURNS).map(lambda v: ("ret", v)),
                     st.sampled_from(SMALL_INTS + BIG_INTS).map(lambda v: ("ret", v)),
                     st.just(("ret_self",)))


DUNDERS = ["__index__", "__int__", "__float__", "__bool__", "__len__", "__iter__", "__getitem__",
           "__complex__"]


def hostile_objects():
    """Recipes of hostile objects: ("obj", ((dunder, behaviour), ...))."""
    return st.lists(st.tuples(st.sampled_from(DUNDERS), behaviour(None)), min_size=1, max_size=3,
                    unique_by=lambda x: x[0]).map(lambda bs: ("obj", tuple(bs)))


# ---------------------------------------------------------------- tensors

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"]
FLOATS = {"float32", "float64", "float16", "bfloat16"}


def value_pool(name):
    """Values of each dtype that make trouble: zeros of both signs, NaN, infinities, subnormals,
    the limits; each representable in the dtype."""
    if name == "bool":
        return [False, True]
    if name in FLOATS:
        fi = torch.finfo(getattr(torch, name))
        return [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 7.0, math.nan, math.inf, -math.inf,
                float(fi.tiny), float(fi.smallest_normal) / 4 or float(fi.tiny), float(fi.max), -float(fi.max),
                float(fi.eps), 100.0, -1e4 if name != "float16" else -1e3]
    ii = torch.iinfo(getattr(torch, name))
    return sorted({0, 1, 2, 3, 7, ii.max, ii.min, ii.max - 1, ii.min + 1} |
                  ({-1, -2, -8} if ii.min < 0 else set()))


def _wide_np(name):
    return np.bool_ if name == "bool" else np.float64 if name in FLOATS else np.int64


SHAPES = [(), (0,), (1,), (3,), (2, 3), (1, 3), (3, 1), (2, 0, 3), (2, 1, 3), (4, 2)]
LAYOUTS = ["contig", "T", "step", "expand", "offset"]


def tensor_recipes(dtypes=DTYPES, shapes=SHAPES, pool=None):
    """("t", dtype, shape, layout, value indices) recipes."""
    return st.tuples(st.just("t"), st.sampled_from(dtypes), st.sampled_from(shapes), st.sampled_from(LAYOUTS),
                     st.lists(st.integers(0, 64), min_size=1, max_size=8).map(tuple),
                     st.just(pool))


def _base_shape(shape, layout):
    n = len(shape)
    if layout == "T" and n >= 2:
        return tuple(reversed(shape))
    if layout == "step" and n >= 1:
        return shape[:-1] + (shape[-1] * 2,)
    if layout == "expand" and n >= 1:
        return (1,) + shape[1:]
    if layout == "offset" and n >= 1:
        return (shape[0] + 1,) + shape[1:]
    return shape


def _apply_layout(t, shape, layout):
    n = len(shape)
    if layout == "T" and n >= 2:
        return t.permute(*reversed(range(n)))
    if layout == "step" and n >= 1:
        return t[(slice(None),) * (n - 1) + (slice(None, None, 2),)]
    if layout == "expand" and n >= 1:
        return t.expand(*shape)
    if layout == "offset" and n >= 1:
        return t[1:]
    return t


def build_tensor(recipe, lib):
    _, name, shape, layout, idx, pool = recipe
    pool = value_pool(name) if pool is None else [v for v in value_pool(name) if v in pool or v != v and
                                                  any(p != p for p in pool)]
    base_shape = _base_shape(tuple(shape), layout)
    n = int(np.prod(base_shape, dtype=np.int64))
    vals = np.array([pool[idx[i % len(idx)] % len(pool)] for i in range(n)], dtype=_wide_np(name))
    vals = vals.reshape(base_shape)
    if lib is torch:
        # resizable storage, unlike from_numpy's. bfloat16 is made from float32 values on both
        # sides: torch's float -> bfloat16 conversion makes a NaN 0xFFFF (sign set), its double ->
        # bfloat16 one 0x7FC0, and kael gives each the same bits (kael/core/half.h)
        wide = vals.astype(np.float32) if name == "bfloat16" else vals
        base = torch.tensor(wide).to(getattr(torch, name))
        if n == 0:
            # NumPy gives an empty array strides of 0, which torch.tensor keeps (kael's are
            # contiguous): view(dtype) checks them
            base = torch.empty(base_shape, dtype=getattr(torch, name))
    else:
        if name == "bfloat16":
            base = kael.tensor(vals.astype(np.float32)).to(kael.bfloat16)
        else:
            base = kael.tensor(vals, dtype=getattr(kael, name))
    return _apply_layout(base, tuple(shape), layout), base


# ---------------------------------------------------------------- building recipes

def build(recipe, lib, bases=None):
    """The object a recipe describes, for torch or for kael. Tensors built are appended, with
    their bases, to `bases` (to compare what a call left in them)."""
    if not isinstance(recipe, tuple) or not recipe or not isinstance(recipe[0], str):
        return recipe
    kind = recipe[0]
    if kind == "lit":
        return recipe[1]
    if kind == "obj":
        return hostile(recipe[1])
    if kind == "np":
        return getattr(np, recipe[1])(recipe[2])
    if kind == "dtype":
        return getattr(lib, recipe[1])
    if kind == "t":
        t, base = build_tensor(recipe, lib)
        if bases is not None:
            bases.append((t, base))
        return t
    if kind == "bytes":  # a bool tensor over foreign bytes: ("bytes", shape, layout, byte values)
        _, shape, layout, values = recipe
        base_shape = _base_shape(tuple(shape), layout)
        n = int(np.prod(base_shape, dtype=np.int64))
        raw = np.array([values[i % len(values)] for i in range(n)], dtype=np.uint8).reshape(base_shape)
        base = lib.tensor(raw, dtype=lib.uint8).view(lib.bool)
        t = _apply_layout(base, tuple(shape), layout)
        if bases is not None:
            bases.append((t, base))
        return t
    if kind == "t0":  # a 0-d tensor holding a Python value
        return lib.tensor(recipe[1])
    if kind in ("list", "tuple"):
        items = [build(r, lib, bases) for r in recipe[1]]
        return items if kind == "list" else tuple(items)
    if kind == "seq":
        return Seq([build(r, lib, bases) for r in recipe[1]], recipe[2])
    if kind == "alias":  # out= that is the i-th argument itself: resolved by the caller
        return recipe
    if kind == "mutlist":  # a list one of whose elements mutates the list it is in when converted
        _, items, pos, how, method = recipe
        target = [build(r, lib, bases) for r in items]
        target.insert(min(pos, len(target)), make_mutator(target, how, method))
        return target
    if kind == "gen":  # a generator of the library called, seeded
        return lib.Generator().manual_seed(recipe[1])
    if kind == "size":  # torch.Size for torch, a tuple for kael (which has no Size type)
        return torch.Size(recipe[1]) if lib is torch else tuple(recipe[1])
    raise AssertionError(f"unknown recipe {recipe!r}")


# ---------------------------------------------------------------- comparing

# Exceptions kael may raise for bad input. Boom comes from the hostile objects themselves.
PYTHON_ERRORS = (RuntimeError, TypeError, ValueError, IndexError, OverflowError, MemoryError,
                 NotImplementedError, BufferError, RecursionError, Boom)
# Exceptions the Python runtime itself raises from a hostile dunder's wrong return value
# (a __index__ returning a str: TypeError; a __len__ returning -1: ValueError).


def _np_values(x, name):
    return np.array(x.tolist(), dtype=_wide_np(name)).reshape(tuple(x.shape))


def dtype_name(d):
    return (str(d) if isinstance(d, torch.dtype) else repr(d)).rsplit(".", 1)[-1]


VALUE_LIMIT = 100_000  # results with more elements are compared by shape, dtype and strides only


def assert_same_tensor(k, t, what, uninitialised=False, computed_in=None):
    assert isinstance(k, kael.Tensor), f"{what}: kael gave {type(k).__name__}, torch a tensor"
    assert k.shape == tuple(t.shape), f"{what}: shape {k.shape} != torch {tuple(t.shape)}"
    name = dtype_name(t.dtype)
    assert dtype_name(k.dtype) == name, f"{what}: dtype {k.dtype} != torch {t.dtype}"
    if uninitialised or t.numel() > VALUE_LIMIT or t.numel() == 0:
        return  # (an empty result has no values; NumPy cannot even shape eye(0, 2**62)'s)
    tv = _np_values(t.float() if name == "bfloat16" else t, name)
    kv = _np_values(k, name)
    if name in FLOATS:
        rtol, atol = DEFAULT_TOL[name]
        if computed_in in ("float16", "bfloat16"):
            rtol, atol = max(rtol, DEFAULT_TOL[computed_in][0]), max(atol, DEFAULT_TOL[computed_in][1])
        with np.errstate(invalid="ignore", over="ignore"):
            ok = (kv == tv) | (np.isnan(kv) & np.isnan(tv)) | (np.abs(kv - tv) <= atol + rtol * np.abs(tv))
    else:
        ok = kv == tv
    if not np.all(ok):
        bad = np.argwhere(~np.asarray(ok))[:4].tolist()
        raise AssertionError(f"{what}: values differ from torch ({name}): " + ", ".join(
            f"at {tuple(i)} kael {kv[tuple(i)]!r} torch {tv[tuple(i)]!r}" for i in bad))


def assert_same_result(k, t, what="result", uninitialised=False):
    if isinstance(t, torch.Tensor):
        assert_same_tensor(k, t, what, uninitialised)
    elif type(t).__module__ == "torch.return_types":  # a named tuple of several results
        assert type(k) is getattr(kael.return_types, type(t).__name__), f"{what}: kael {k!r}, torch {t!r}"
        for i, (a, b) in enumerate(zip(k, t)):
            assert_same_result(a, b, f"{what}.{type(t)._fields[i] if hasattr(type(t), '_fields') else i}",
                               uninitialised)
    elif isinstance(t, (tuple, list)) and not isinstance(t, torch.Size):
        assert isinstance(k, type(t)) and len(k) == len(t), f"{what}: kael {k!r}, torch {t!r}"
        for i, (a, b) in enumerate(zip(k, t)):
            assert_same_result(a, b, f"{what}[{i}]", uninitialised)
    elif isinstance(t, torch.dtype):
        assert dtype_name(k) == dtype_name(t), f"{what}: kael {k!r}, torch {t!r}"
    elif isinstance(t, float) and math.isnan(t):
        assert isinstance(k, float) and math.isnan(k), f"{what}: kael {k!r}, torch {t!r}"
    else:
        if isinstance(t, torch.Size):
            assert type(k) is kael.Size, f"{what}: kael {k!r} ({type(k).__name__}), torch {t!r}"
            k, t = tuple(k), tuple(t)
        assert type(k) is type(t) and k == t, f"{what}: kael {k!r} ({type(k).__name__}), torch {t!r}"


def run_both(call, recipe, *, uninitialised=False, compare_inputs=True, allowed=None):
    allowed = allowed or known_difference
    """Builds `recipe` (a tuple of argument recipes) for each library and runs
    call(lib, *args) on both; asserts the properties of the module doc. `allowed(kexc, texc)`
    may accept a listed difference (it returns a reason or None). Returns (kael outcome,
    torch outcome) for further checks."""
    tbases, kbases = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        targs = [build(r, torch, tbases) for r in recipe]
        try:
            tres, terr = call(torch, *targs), None
        except Exception as e:  # noqa: BLE001  (torch's verdict, whatever it is)
            tres, terr = None, e
        kargs = [build(r, kael, kbases) for r in recipe]
        kbefore = [_np_values(b, dtype_name(b.dtype)) if b.numel() <= VALUE_LIMIT else None for _, b in kbases]
        try:
            kres, kerr = call(kael, *kargs), None
        except Exception as e:  # noqa: BLE001
            kres, kerr = None, e
    if kerr is not None:
        assert not isinstance(kerr, SystemError), f"kael raised SystemError: {kerr!r}"
        assert isinstance(kerr, PYTHON_ERRORS), f"kael raised {type(kerr).__name__}: {kerr}"
        for (_, b), before in zip(kbases, kbefore):  # a failed call writes nothing
            if before is not None:
                after = _np_values(b, dtype_name(b.dtype))
                assert np.array_equal(after, before, equal_nan=b.dtype not in (kael.bool,) and
                                      dtype_name(b.dtype) in FLOATS), \
                    f"kael raised {kerr!r} but changed an input"
        if terr is None:
            reason = allowed(kerr, None, tres) or known_difference(kerr, None, tres)
            assert reason, f"kael raised {type(kerr).__name__}: {kerr}\nwhere torch gave {tres!r:.300}"
        return kerr, terr
    if terr is not None:
        reason = allowed(None, terr, None) or known_difference(None, terr, None)
        assert reason, f"kael gave {kres!r:.300}\nwhere torch raised {type(terr).__name__}: {terr}"
        return kres, terr
    assert_same_result(kres, tres, uninitialised=uninitialised)
    if compare_inputs:
        for i, ((_, kb), (_, tb)) in enumerate(zip(kbases, tbases)):
            assert_same_tensor(kb, tb, f"input tensor {i} after the call")
    return kres, tres


# ---------------------------------------------------------------- deliberate differences

def known_difference(kerr, terr, tres=None):
    """Why kael may raise where torch computes (kerr set, terr None), or the reverse: a short
    reason for each difference kael makes on purpose, or None. Each is documented where named."""
    if kerr is not None and terr is None:
        msg = str(kerr)
        # torch.zeros(0).expand(-3, 0) gives a tensor of size (-3, 0): a torch bug, where kael
        # raises torch's own error for a negative size.
        if isinstance(tres, torch.Tensor) and any(n < 0 for n in tres.shape):
            return "torch gives a negative size"
        # A dtype an entry's `dtypes:` leaves out (test_pointwise_registry.py tests exactly which)
        if "not implemented for dtype" in msg and isinstance(kerr, RuntimeError):
            return "dtype not in the entry's dtypes"
        # codegen/README.md: a pointwise op needs a tensor input; kael.add(1, 2) (and with out=)
        # raises TypeError where torch computes a 0-d tensor.
        if isinstance(kerr, TypeError) and "got only numbers" in msg:
            return "numbers only"
        # docs/decisions/hostile-input.md (Hostile Python input): a tensor has at most 64 dims in kael
        # (ValueError); torch has no such limit.
        if isinstance(kerr, ValueError) and "at most 64 dimensions" in msg:
            return "at most 64 dims"
        # docs/hardening.md (Known differences): an index with more than one Ellipsis is
        # NumPy's IndexError in kael; torch takes it (pytorch/pytorch#59787)
        if isinstance(kerr, IndexError) and "can only have a single ellipsis" in msg:
            return "more than one Ellipsis"
        # docs/hardening.md (Known differences): an index out of range is an IndexError in kael
        # (and NumPy) even where the indexed tensor has no elements; torch's index kernel checks
        # only the elements it reads or writes (zeros(2, 0, 3)[[2]] has shape (1, 0, 3))
        if (isinstance(kerr, IndexError) and "is out of bounds for dimension" in msg
                and isinstance(tres, torch.Tensor) and tres.numel() == 0):
            return "index out of range into no elements"
    return None


# ---------------------------------------------------------------- the wrapper (normal test run)

FUZZ_FILES = sorted(str(p) for p in HERE.glob("test_fuzz_*.py") if p.name != "test_fuzz_regressions.py")


CHILD_MEMORY = 12 * 2 ** 30


def _child_memory():
    """The child's memory cap in bytes: CHILD_MEMORY, or KAEL_FUZZ_CHILD_MEMORY (tools/fuzz_long.py
    shares the machine among its children)."""
    return int(os.environ.get("KAEL_FUZZ_CHILD_MEMORY", CHILD_MEMORY))


def _limit_memory():
    """A hostile input that makes torch or kael take memory without bound gets MemoryError in
    the child instead of the machine's OOM killer. Not under ASan, which reserves terabytes of
    address space for its shadow memory: there run_child caps each allocation instead."""
    if "asan" not in os.environ.get("LD_PRELOAD", ""):
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (_child_memory(), _child_memory()))


def _asan_allocation_cap(env):
    """Under ASan an allocation past a quarter of the child's cap fails (MemoryError in kael, a
    RuntimeError in torch) rather than taking the machine: bincount of a tensor holding
    2**31 - 1 asks 16 GiB in torch and again in kael, and the OOM killer ended both children of
    a long run. (ASan's allocator_may_return_null=1, set by tools/run_sanitizers.sh, makes the
    request fail instead of aborting.)"""
    if "asan" in env.get("LD_PRELOAD", ""):
        cap = f"max_allocation_size_mb={_child_memory() // 4 // 2 ** 20}"
        env["ASAN_OPTIONS"] = f"{env['ASAN_OPTIONS']}:{cap}" if env.get("ASAN_OPTIONS") else cap


def run_child(profile, extra_args=(), timeout=None, env=None, log_path=None, tests=None):
    """Runs the property files (or the node ids `tests` names) in a child pytest; returns
    (returncode, output, stats, trace). With log_path, the child's output (stdout and stderr)
    goes to that file as it runs, so a run that is interrupted or dies keeps all of it, and is
    read back from there."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        stats_path, trace_path = os.path.join(tmp, "stats.json"), os.path.join(tmp, "trace.txt")
        child_env = dict(os.environ if env is None else env, KAEL_FUZZ_CHILD="1", KAEL_FUZZ_PROFILE=profile,
                         KAEL_FUZZ_STATS=stats_path, KAEL_FUZZ_TRACE=trace_path, PYTHONFAULTHANDLER="1")
        _asan_allocation_cap(child_env)
        cmd = [sys.executable, "-m", "pytest", *(FUZZ_FILES if tests is None else tests), "-q", "-p", "no:cacheprovider",
               "--rootdir", str(ROOT), *extra_args]
        # (in the current directory: tools/run_sanitizers.sh runs from the instrumented package's)
        if log_path is None:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env, timeout=timeout,
                                  preexec_fn=_limit_memory)
            out = proc.stdout + proc.stderr
        else:
            with open(log_path, "w") as log:
                proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=child_env, timeout=timeout,
                                      preexec_fn=_limit_memory)
            out = Path(log_path).read_text(errors="replace")
        stats = json.loads(Path(stats_path).read_text()) if os.path.exists(stats_path) else {}
        trace = Path(trace_path).read_text() if os.path.exists(trace_path) else ""
    return proc.returncode, out, stats, trace


if not IN_CHILD:
    def test_fuzz_suite_in_subprocess():
        import resource
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        rc, out, stats, trace = run_child("kael-ci", timeout=1200)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        # CPU time, not wall time: the machines that run the tests are shared
        elapsed = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        assert rc == 0, (f"fuzz suite failed (exit {rc}); last example started: {trace}\n"
                         f"{out[-12000:]}")
        # Every property ran its examples. Its cost is reported, not asserted: a timed test
        # fails on a loaded machine and proves nothing about speed (tools/fuzz_long.py measures).
        assert stats.get("total", 0) >= 2000, stats
        print(f"fuzz suite: {stats.get('total')} examples in {elapsed:.1f} s of CPU time")
