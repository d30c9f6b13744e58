"""Shared helpers for the kael test-suite.

PyTorch is the oracle: every test builds the same inputs for torch and kael,
runs the same expression on both and compares shape, dtype and values with
``check``.  ``compare`` wraps the whole "run on both, compare, or make sure
both raise" pattern so that each case is about one line.
"""
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import kael

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))
from codegen import enums  # noqa: E402  (the single source of the dtype lists)

DTYPE_NAMES = list(enums.DTYPE_NAMES)
FLOAT_NAMES = list(enums.FLOATING_NAMES)
INT_NAMES = list(enums.INTEGRAL_NAMES)
HALF_NAMES = [n for n in FLOAT_NAMES if enums.BY_NAME[n].itemsize == 2]
NUMERIC_NAMES = [n for n in DTYPE_NAMES if n != "bool"]
BUFFER_NAMES = [d.name for d in enums.DTYPES if d.buffer_format]  # dtypes NumPy arrays carry

# Pointwise registry entries the by-name harnesses (test_pointwise_registry.py, test_registry.py)
# cannot drive (three inputs, private kernels of composites, ops torch keeps in
# torch.nn.functional), each compared with torch by hand in the file named.
POINTWISE_BY_HAND = {
    "where": "test_pointwise_more.py", "lerp": "test_pointwise_more.py",
    "_nan_to_num": "test_pointwise_more.py",  # through nan_to_num
    "_gelu": "test_pointwise_more.py", "_gelu_tanh": "test_pointwise_more.py",  # through gelu
    "_gelu_grad": "test_pointwise_more.py", "_gelu_tanh_grad": "test_pointwise_more.py",
    "_threshold_backward": "test_pointwise_more.py",  # through relu's gradient
    "silu": "test_pointwise_more.py", "softplus": "test_pointwise_more.py",
    "_round_decimals": "test_forms.py",  # through round(decimals=)
    "_logit": "test_pointwise_more.py",  # through logit (eps=None is the kernel's -1)
}

# Exceptions kael may use where torch raises for an unsupported dtype/shape
# combination (NotImplementedError is a subclass of RuntimeError).
KAEL_ERRORS = (RuntimeError, TypeError, ValueError, IndexError)


# --------------------------------------------------------------------------
# dtype mapping
# --------------------------------------------------------------------------
def kdtype(name):
    """kael dtype object for a dtype name (or pass-through of a kael dtype)."""
    if isinstance(name, str):
        return getattr(kael, name)
    return name


def tdtype(name):
    """torch dtype for a dtype name, a kael dtype or a torch dtype."""
    if isinstance(name, torch.dtype):
        return name
    if isinstance(name, str):
        return getattr(torch, name)
    return getattr(torch, kael_dtype_name(name))


def kael_dtype_name(kd):
    for n in DTYPE_NAMES:
        if kd is getattr(kael, n):
            return n
    raise AssertionError(f"{kd!r} is not one of the kael dtype singletons")


def torch_dtype_name(td):
    for n in DTYPE_NAMES:
        if td == getattr(torch, n):
            return n
    raise AssertionError(f"torch dtype {td} has no kael equivalent")


def torch_to_kael_dtype(td):
    return getattr(kael, torch_dtype_name(td))


# --------------------------------------------------------------------------
# conversions
# --------------------------------------------------------------------------
def to_kael(t):
    """Contiguous kael copy of a torch tensor (through NumPy)."""
    if isinstance(t, torch.Tensor):
        if t.dtype == torch.bfloat16:  # NumPy has no bfloat16: go through float32, which holds it exactly
            k = to_kael(t.float()).to(kael.bfloat16)
            assert k.shape == tuple(t.shape)
            return k
        arr = np.array(t.detach().cpu().numpy(), copy=True, order="C")  # (ascontiguousarray makes 0-d 1-d)
        k = kael.tensor(arr)
        assert k.dtype is torch_to_kael_dtype(t.dtype)
        assert k.shape == tuple(t.shape)
        return k
    return t  # python scalars and other values pass through


def to_torch(k):
    """torch copy of a kael tensor (through tolist)."""
    td = tdtype(k.dtype)
    return torch.tensor(k.tolist(), dtype=td).reshape(k.shape)


def is_kael_tensor(x):
    tensor_type = getattr(kael, "Tensor", None)
    if isinstance(tensor_type, type):
        return isinstance(x, tensor_type)
    return (not isinstance(x, (torch.Tensor, np.ndarray)) and hasattr(x, "tolist")
            and hasattr(x, "dtype") and hasattr(x, "shape"))


# --------------------------------------------------------------------------
# comparison
# --------------------------------------------------------------------------
DEFAULT_TOL = {
    "float16": (1e-3, 1e-5),  # (rtol, atol): torch.testing defaults
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}
DEFAULT_TOL.update({n: (0.0, 0.0) for n in DTYPE_NAMES if n not in FLOAT_NAMES})
assert set(DEFAULT_TOL) == set(DTYPE_NAMES)


def check(kres, tres, atol=None, rtol=None):
    """Assert a kael result equals a torch result in shape, dtype and values.

    Floats are compared with per-dtype default tolerances (overridable),
    integers and bool exactly; NaN positions must agree, infinities must agree.
    """
    assert isinstance(tres, torch.Tensor)
    assert is_kael_tensor(kres), f"expected a kael tensor, got {type(kres)!r}"
    shape = kres.shape
    assert type(shape) is kael.Size, f"shape must be a kael.Size, got {type(shape)!r}"
    assert all(type(s) is int for s in shape), shape
    assert shape == tuple(tres.shape), f"shape {shape} != torch {tuple(tres.shape)}"
    name = torch_dtype_name(tres.dtype)
    assert kres.dtype is getattr(kael, name), f"dtype {kres.dtype} != torch {tres.dtype}"
    kt = to_torch(kres)
    drtol, datol = DEFAULT_TOL[name]
    rtol = drtol if rtol is None else rtol
    atol = datol if atol is None else atol
    if name not in FLOAT_NAMES:
        assert torch.equal(kt, tres), f"\nkael:  {kt}\ntorch: {tres}"
    else:
        torch.testing.assert_close(kt, tres.detach(), rtol=rtol, atol=atol, equal_nan=True)


# --------------------------------------------------------------------------
# random inputs
# --------------------------------------------------------------------------
def rand_torch(shape, dtype="float32", domain="any"):
    """Random torch tensor.

    domain: "any" (signed values), "pos" (strictly positive, for log/sqrt/...),
    "nonzero" (no zeros, for divisors), "small" (ints 0..3 / floats in [-2,2]:
    for exponents).
    """
    td = tdtype(dtype)
    shape = tuple(shape)
    if td == torch.bool:
        return torch.randint(0, 2, shape) == 1
    if td.is_floating_point:
        if domain == "pos":
            return (torch.rand(shape, dtype=torch.float64) * 3 + 0.1).to(td)
        if domain == "nonzero":
            r = torch.rand(shape, dtype=torch.float64) * 3 + 0.25
            s = torch.randint(0, 2, shape) * 2 - 1
            return (r * s).to(td)
        if domain == "small":
            return (torch.rand(shape, dtype=torch.float64) * 4 - 2).to(td)
        return (torch.randn(shape, dtype=torch.float64) * 2).to(td)
    # integers (unsigned ones without the negative half)
    signed = enums.BY_NAME[torch_dtype_name(td)].signed
    if domain == "pos":
        return torch.randint(1, 6, shape, dtype=td)
    if domain == "nonzero":
        r = torch.randint(1, 6, shape, dtype=td)
        return r * (torch.randint(0, 2, shape, dtype=td) * 2 - 1) if signed else r
    if domain == "small":
        return torch.randint(0, 4, shape, dtype=td)
    return torch.randint(-5 if signed else 0, 6 if signed else 11, shape, dtype=td)


# --------------------------------------------------------------------------
# layouts: the same view ops are applied to a contiguous base in torch and in
# kael so that the kael input really is non-contiguous.
# --------------------------------------------------------------------------
LAYOUTS = ["contig", "T", "transpose", "step", "expand"]


def _base_shape(shape, layout):
    shape = tuple(shape)
    n = len(shape)
    if layout == "contig":
        return shape
    if layout == "T":  # reversed dims, viewed back with .T / permute
        assert n >= 2
        return tuple(reversed(shape))
    if layout == "transpose":
        assert n >= 2
        s = list(shape)
        s[0], s[-1] = s[-1], s[0]
        return tuple(s)
    if layout == "step":
        assert n >= 1
        return shape[:-1] + (shape[-1] * 2,)
    if layout == "expand":
        assert n >= 1
        return (1,) + shape[1:]
    raise ValueError(layout)


def apply_layout(t, shape, layout):
    """Apply the layout's view op (works on torch and kael tensors alike)."""
    n = len(shape)
    if layout == "contig":
        return t
    if layout == "T":
        if n == 2:
            return t.T
        return t.permute(*reversed(range(n)))
    if layout == "transpose":
        return t.transpose(0, n - 1)
    if layout == "step":
        return t[(slice(None),) * (n - 1) + (slice(None, None, 2),)]
    if layout == "expand":
        return t.expand(*shape)
    raise ValueError(layout)


class Pair:
    """A torch tensor and an equal kael tensor built with the same layout."""

    def __init__(self, t, k, tbase, kbase):
        self.t, self.k, self.tbase, self.kbase = t, k, tbase, kbase


def make_pair(shape, dtype="float32", layout="contig", domain="any"):
    shape = tuple(shape)
    tbase = rand_torch(_base_shape(shape, layout), dtype, domain)
    kbase = to_kael(tbase)
    t = apply_layout(tbase, shape, layout)
    k = apply_layout(kbase, shape, layout)
    assert tuple(t.shape) == shape
    if layout != "contig" and t.numel() > 1:
        assert not t.is_contiguous(), (shape, layout)
        assert not k.is_contiguous(), f"kael input for layout {layout} should be non-contiguous"
    return Pair(t, k, tbase, kbase)


def is_spec(s):
    return (isinstance(s, tuple) and 2 <= len(s) <= 4 and isinstance(s[0], tuple)
            and isinstance(s[1], str) and s[1] in DTYPE_NAMES)


def pairs(*specs):
    """specs: (shape, dtype[, layout[, domain]]) tuples, or python scalars."""
    out = []
    for s in specs:
        if is_spec(s):
            out.append(make_pair(*s))
        else:
            out.append(s)
    return out


# --------------------------------------------------------------------------
# the one-line op test helper
# --------------------------------------------------------------------------
def _is_tensor_result(x):
    return isinstance(x, torch.Tensor)


def compare(fn, *specs, atol=None, rtol=None, lib_arg=True, check_same=None):
    """Run ``fn`` on torch and kael inputs and compare.

    ``fn(lib, *inputs)`` (or ``fn(*inputs)`` with lib_arg=False) is evaluated
    once with lib=torch and torch inputs, once with lib=kael and kael inputs.
    specs are (shape, dtype[, layout[, domain]]) tuples (random tensors) or
    literal python values passed unchanged.  If torch raises, kael must raise
    one of KAEL_ERRORS.  If ``check_same`` is an index, the result must be the
    very same object as that input (in-place ops) on both sides, and the
    mutated input is compared too.  Returns the (kael, torch) results.
    """
    ps = pairs(*specs)
    tin = [p.t if isinstance(p, Pair) else p for p in ps]
    kin = [p.k if isinstance(p, Pair) else p for p in ps]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tres = fn(torch, *tin) if lib_arg else fn(*tin)
        except Exception as e:  # torch rejects this case -> kael must too
            terr = e
        else:
            terr = None
    if terr is not None:
        if os.environ.get("KAEL_TEST_LOG_TORCH_ERRORS"):
            with open(os.environ["KAEL_TEST_LOG_TORCH_ERRORS"], "a") as f:
                f.write(f"{os.environ.get('PYTEST_CURRENT_TEST', '?')}\t{type(terr).__name__}: {str(terr)[:100]}\n")
        with pytest.raises(KAEL_ERRORS):
            fn(kael, *kin) if lib_arg else fn(*kin)
        return None, terr
    kres = fn(kael, *kin) if lib_arg else fn(*kin)
    if isinstance(tres, (tuple, list)):
        assert len(kres) == len(tres)
        for a, b in zip(kres, tres):
            check(a, b, atol=atol, rtol=rtol)
    else:
        check(kres, tres, atol=atol, rtol=rtol)
    if check_same is not None:
        assert tres is tin[check_same]
        assert kres is kin[check_same], "in-place op must return the very same object"
        p = ps[check_same]
        check(p.kbase, p.tbase, atol=atol, rtol=rtol)
    return kres, tres


def compare_raises(fn, *specs, lib_arg=True):
    """Both torch and kael must raise (kael: one of KAEL_ERRORS)."""
    ps = pairs(*specs)
    tin = [p.t if isinstance(p, Pair) else p for p in ps]
    kin = [p.k if isinstance(p, Pair) else p for p in ps]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception):
            fn(torch, *tin) if lib_arg else fn(*tin)
    with pytest.raises(KAEL_ERRORS):
        fn(kael, *kin) if lib_arg else fn(*kin)


def view_offset(v, base):
    """Element offset of view v's first element relative to base."""
    d = v.data_ptr() - base.data_ptr()
    es = v.element_size()
    assert d % es == 0
    return d // es


def check_view(kv, tv, kbase, tbase):
    """Compare a view result: values, shape, dtype, stride, contiguity, offset."""
    check(kv, tv)
    assert kv.stride() == tuple(tv.stride()), f"stride {kv.stride()} != torch {tv.stride()}"
    assert type(kv.stride()) is tuple
    assert kv.is_contiguous() == tv.is_contiguous()
    if tv.numel() > 0 and tv.untyped_storage().data_ptr() == tbase.untyped_storage().data_ptr():
        assert view_offset(kv, kbase) == view_offset(tv, tbase)


def run_in_threads(fn, args):
    """Runs fn(arg) for each arg on a Python thread of its own, all at once, and raises the first
    exception a thread raised (AssertionError included) once every thread has ended."""
    import threading
    errors = []

    def body(arg):
        try:
            fn(arg)
        except BaseException as e:  # noqa: BLE001 (re-raised below)
            errors.append(e)

    threads = [threading.Thread(target=body, args=(a,)) for a in args]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def where_the_gil_was_released(call, attempts=1000):
    """Where call() let another Python thread run, as the calling thread's innermost Python frame
    then (a traceback.FrameSummary: file, function, source line), or None when it held the GIL
    throughout. Another thread is woken as the first call starts, and call() runs again and again
    until that thread has run (at most `attempts` times: a thread woken late may miss one call's
    release, not all of them). With a switch interval far longer than the test the calling
    thread gives the GIL up only where it releases it (a C++ call that releases it, a blocking
    wait), not every few milliseconds, and nothing else in the loop releases it: so the thread
    runs inside call(), where call() releases the GIL, or, for a call that holds it, only after
    the loop. Nothing is timed."""
    import threading
    import traceback
    caller = threading.get_ident()
    state = {"running": False, "where": None}
    ran = threading.Event()
    go = threading.Event()

    def observer():
        go.wait()
        if state["running"]:
            state["where"] = traceback.extract_stack(sys._current_frames()[caller], limit=1)[-1]
        ran.set()

    thread = threading.Thread(target=observer)
    thread.start()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        go.set()
        for _ in range(attempts):
            state["running"] = True
            call()
            state["running"] = False
            if ran.is_set():
                break
    finally:
        state["running"] = False
        sys.setswitchinterval(interval)
        thread.join()
    return state["where"]


def logging_subclass(seen):
    """A kael.Tensor subclass whose __kael_function__ appends the name of every function it sees
    to `seen`, then runs it (a Python key in the tests' sense)."""

    class Logged(kael.Tensor):
        @classmethod
        def __kael_function__(cls, func, types, args=(), kwargs=None):
            seen.append(getattr(func, "__name__", str(func)))
            return super().__kael_function__(func, types, args, kwargs or {})

    return Logged
