"""out= of every registry entry with an `out:` key (the matrix products matmul, mm, mv, dot, vdot,
bmm, addmm, baddbmm; hstack, vstack) as torch's: the result written into out and out returned,
out of another shape resized (a UserWarning when it had elements), a wrong dtype or a non-tensor
out refused with torch's exception class, out= refused when an argument requires grad, out
aliasing an input, and inputs with a dim of size 0. A new `out:` entry without samples
here fails test_every_out_entry_has_samples."""
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import kael

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from codegen.model import parse_registry  # noqa: E402

OUT_KIND = {f.name: f.out for f in parse_registry((ROOT / "native_functions.yaml").read_text(), "native_functions.yaml")
            if f.out}
OUT_ENTRIES = sorted(OUT_KIND)


def _args(lib, name, n=2, k=3, m=4, b=2):
    rng = np.random.default_rng(7)

    def t(*shape):
        return lib.tensor(rng.standard_normal(shape).astype(np.float32))

    return {
        "matmul": lambda: (t(b, n, k), t(k, m)),
        "mm": lambda: (t(n, k), t(k, m)),
        "mv": lambda: (t(n, k), t(k)),
        "dot": lambda: (t(k), t(k)),
        "bmm": lambda: (t(b, n, k), t(b, k, m)),
        "addmm": lambda: (t(n, m), t(n, k), t(k, m)),
        "baddbmm": lambda: (t(b, n, m), t(b, n, k), t(b, k, m)),
        "vdot": lambda: (t(k), t(k)),
        "hstack": lambda: ([t(n, k), t(n, m)],),
        "vstack": lambda: ([t(n, k), t(m, k)],),
        "tensordot": lambda: (t(n, b, k), t(b, k, m), 2),
    }[name]()


SAMPLED = ["matmul", "mm", "mv", "dot", "vdot", "bmm", "addmm", "baddbmm", "hstack", "vstack", "tensordot"]
OPS = OUT_ENTRIES


def test_every_out_entry_has_samples():
    assert OUT_ENTRIES == sorted(SAMPLED)


def _run(lib, name, out_shape, **sizes):
    args = _args(lib, name, **sizes)
    out = lib.full(out_shape, 5.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        returned = getattr(lib, name)(*args, out=out)
    resized = [w for w in caught if "resized" in str(w.message)]
    return returned is out, np.asarray(out.tolist(), dtype=np.float32), tuple(out.shape), len(resized)


@pytest.mark.parametrize("out_shape", ["right", (0,), (5,), (1, 1, 1, 1)])
@pytest.mark.parametrize("name", OPS)
def test_out_written_resized_and_returned(name, out_shape):
    expected = getattr(torch, name)(*_args(torch, name))
    shape = tuple(expected.shape) if out_shape == "right" else out_shape
    k = _run(kael, name, shape)
    t = _run(torch, name, shape)
    assert k[0] and t[0]
    assert k[2] == t[2]
    assert k[3] == t[3], "a resize warning exactly where torch warns"
    np.testing.assert_allclose(k[1], t[1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("sizes", [dict(n=0), dict(k=0), dict(m=0), dict(b=0)])
def test_out_with_empty_dims(name, sizes):
    expected = getattr(torch, name)(*_args(torch, name, **sizes))
    k = _run(kael, name, (3,), **sizes)
    t = _run(torch, name, (3,), **sizes)
    assert k[2] == t[2] == tuple(expected.shape)
    np.testing.assert_allclose(k[1], t[1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", OPS)
def test_out_of_another_dtype_or_kind_is_refused(name):
    for lib in (torch, kael):
        if OUT_KIND[name] == "exact":  # the products: out must have the result's dtype
            with pytest.raises(RuntimeError):
                getattr(lib, name)(*_args(lib, name), out=lib.empty(0, dtype=lib.float64))
        else:  # cat's family: any dtype the result casts to, TypeError for the others
            with pytest.raises(TypeError):
                getattr(lib, name)(*_args(lib, name), out=lib.empty(0, dtype=lib.int64))
        with pytest.raises(TypeError):
            getattr(lib, name)(*_args(lib, name), out=[1.0])


@pytest.mark.parametrize("name", [n for n in OPS if OUT_KIND[n] == "castable"])
def test_castable_out_takes_the_result_converted(name):
    got = {}
    for lib in (torch, kael):
        out = lib.empty(0, dtype=lib.float64)
        assert getattr(lib, name)(*_args(lib, name), out=out) is out
        got[lib.__name__] = (str(out.dtype).split(".")[1], tuple(out.shape), out.tolist())
    assert got["kael"] == got["torch"]


@pytest.mark.parametrize("name", OPS)
def test_out_refused_when_an_argument_requires_grad(name):
    for lib in (torch, kael):
        args = _args(lib, name)
        (args[0][0] if isinstance(args[0], list) else args[0]).requires_grad_(True)
        if lib is torch and name == "tensordot":
            continue  # torch's composite tensordot.out skips the check its other out= ops make; kael makes it
        with pytest.raises(RuntimeError, match="out="):
            getattr(lib, name)(*args, out=lib.empty(0))
        with lib.no_grad():
            assert getattr(lib, name)(*args, out=lib.empty(0)) is not None


@pytest.mark.parametrize("name", ["matmul", "mm", "addmm"])
def test_out_aliasing_an_input_gets_the_product_of_the_old_values(name):
    # the oracle is torch's product of copies: torch's own aliased call is no oracle, its MKL path
    # writes zeros on some CPUs (AMD EPYC) and the product on others
    x = np.arange(9, dtype=np.float32).reshape(3, 3)
    args = [torch.tensor(x) for _ in range(3 if name == "addmm" else 2)]
    expected = getattr(torch, name)(*args)
    k = kael.tensor(x)
    assert getattr(kael, name)(*([k] * len(args)), out=k) is k
    np.testing.assert_array_equal(np.asarray(k.tolist(), dtype=np.float32), expected.numpy())


@pytest.mark.parametrize("name", OPS)
def test_out_runs_outside_autocast_as_torch(name):
    # torch's out= variants are not in autocast's tables: they compute in the inputs' dtypes, and an
    # out of the autocast dtype is refused where the result's dtype is required
    # One difference, on purpose: torch autocasts tensordot's out= variant (so a float32 out is
    # refused under a bfloat16 autocast); kael runs every out= variant outside autocast, tensordot's too.
    def outcome(lib, out_dtype):
        with lib.autocast("cpu", dtype=lib.bfloat16):
            out = lib.empty(0, dtype=getattr(lib, out_dtype))
            try:
                return getattr(lib, name)(*_args(lib, name), out=out) is out, str(out.dtype).split(".")[1]
            except RuntimeError as e:
                return type(e).__name__

    assert outcome(kael, "float32") == (True, "float32")
    if name == "tensordot":  # the result is float32: a bfloat16 out is refused (exact out dtype)
        assert outcome(kael, "bfloat16") == "RuntimeError"
    else:
        assert outcome(torch, "float32") == (True, "float32")
        assert outcome(kael, "bfloat16") == outcome(torch, "bfloat16")


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("window", [(0, 1), (2, 6), (0, 40)], ids=str)
def test_resized_out_keeps_its_storage_as_resize_(name, window):
    # docs/decisions/out-resize.md: a view of a base, resized, writes through the base's storage
    # (grown in place when too small), as torch's resize_
    seen = {}
    for lib in (torch, kael):
        base = lib.zeros(48)
        out = base[window[0]:window[1]]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            getattr(lib, name)(*_args(lib, name), out=out)
        seen[lib.__name__] = (out.storage_offset(), tuple(out.shape), np.round(np.asarray(base.tolist()), 4).tolist())
    assert seen["kael"] == seen["torch"]
