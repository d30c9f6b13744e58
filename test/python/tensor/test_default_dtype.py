"""kael.set_default_dtype / get_default_dtype against torch's: every way a floating tensor is made
without a dtype, Python floats in type promotion, integer inputs promoted to floating, reprs, the
errors (Note [The default dtype] in kael/core/scalar_type.h)."""
import subprocess
import sys

import numpy as np
import pytest
import torch

import kael

FLOATING = ["float32", "float64", "float16", "bfloat16"]


@pytest.fixture
def default(request):
    """Sets both libraries' default dtype to the named one for the test, and back after it."""
    def set_both(name):
        kael.set_default_dtype(getattr(kael, name))
        torch.set_default_dtype(getattr(torch, name))
    yield set_both
    kael.set_default_dtype(kael.float32)
    torch.set_default_dtype(torch.float32)


def dtype_name(d):
    return str(d).split(".")[-1]


# (name, a function of the library module giving a tensor); each made with no dtype.
MAKERS = [
    ("tensor float", lambda m: m.tensor([1.5, 2.0])),
    ("tensor mixed", lambda m: m.tensor([1, 2.5])),
    ("tensor 0-d float", lambda m: m.tensor(1.5)),
    ("tensor nested", lambda m: m.tensor([[1.0], [2.0]])),
    ("tensor empty", lambda m: m.tensor([])),
    ("tensor int", lambda m: m.tensor([1, 2])),
    ("tensor bool", lambda m: m.tensor([True])),
    ("as_tensor float", lambda m: m.as_tensor([0.5])),
    ("zeros", lambda m: m.zeros(2, 3)),
    ("ones", lambda m: m.ones(2)),
    ("empty", lambda m: m.empty(2)),
    ("full float", lambda m: m.full((2,), 1.5)),
    ("full int", lambda m: m.full((2,), 1)),
    ("full bool", lambda m: m.full((2,), True)),
    ("eye", lambda m: m.eye(2)),
    ("arange float", lambda m: m.arange(0.0, 3)),
    ("arange float step", lambda m: m.arange(0, 3, 0.5)),
    ("arange int", lambda m: m.arange(3)),
    ("linspace", lambda m: m.linspace(0, 1, 5)),
    ("logspace", lambda m: m.logspace(0, 1, 3)),
    ("rand", lambda m: m.rand(2)),
    ("randn", lambda m: m.randn(2)),
    ("normal", lambda m: m.normal(0.0, 1.0, (2,))),
    ("randint", lambda m: m.randint(0, 3, (2,))),
    ("zeros_like int", lambda m: m.zeros_like(m.tensor([1]))),
    ("full_like int float fill", lambda m: m.full_like(m.tensor([1]), 2.5)),
    ("numpy float32 scalar", lambda m: m.tensor(np.float32(1.0))),
    ("numpy float32 in a list", lambda m: m.tensor([np.float32(1.0)])),
    ("numpy float32 array", lambda m: m.tensor(np.array([1.0], dtype=np.float32))),
    ("numpy float64 array", lambda m: m.tensor(np.array([1.0]))),
    ("int * float", lambda m: m.tensor([1, 2]) * 1.5),
    ("0-d int * float", lambda m: m.tensor(1) * 2.5),
    ("int / int", lambda m: m.tensor([1, 2]) / m.tensor([2, 2])),
    ("int / 2", lambda m: m.tensor([1, 2]) / 2),
    ("sqrt int", lambda m: m.sqrt(m.tensor([4, 9]))),
    ("exp bool", lambda m: m.exp(m.tensor([True, False]))),
    ("float32 * python float", lambda m: m.ones(2, dtype=m.float32) * 2.5),
    ("float32 * 0-d default", lambda m: m.ones(2, dtype=m.float32) * m.tensor(2.0)),
    ("float16 + python float", lambda m: m.ones(2, dtype=m.float16) + 0.5),
    ("logsumexp int", lambda m: m.logsumexp(m.tensor([1, 2, 3]), 0)),
    ("logit int", lambda m: m.logit(m.tensor([0, 1]))),
    ("sinc int", lambda m: m.sinc(m.tensor([1, 2]))),
    ("deg2rad int", lambda m: m.deg2rad(m.tensor([180]))),
    ("rad2deg int", lambda m: m.rad2deg(m.tensor([1]))),
    ("ldexp int", lambda m: m.ldexp(m.tensor([1, 2]), m.tensor([1, 2]))),
    ("cov int", lambda m: m.cov(m.tensor([[1, 2, 4], [3, 4, 7]]))),
    ("float() stays float32", lambda m: m.tensor([1]).float()),
    ("double()", lambda m: m.tensor([1]).double()),
    ("linear weight", lambda m: m.nn.Linear(3, 2).weight),
    ("layer norm weight", lambda m: m.nn.LayerNorm(3).weight),
    ("embedding weight", lambda m: m.nn.Embedding(4, 3).weight),
]


@pytest.mark.parametrize("name", FLOATING)
@pytest.mark.parametrize("case", MAKERS, ids=[c[0] for c in MAKERS])
def test_made_without_a_dtype(default, name, case):
    default(name)
    assert dtype_name(kael.get_default_dtype()) == dtype_name(torch.get_default_dtype()) == name
    _, make = case
    k, t = make(kael), make(torch)
    assert dtype_name(k.dtype) == dtype_name(t.dtype)
    assert tuple(k.shape) == tuple(t.shape)


@pytest.mark.parametrize("name", FLOATING)
def test_values_follow_the_dtype(default, name):
    default(name)
    # a value float32 cannot hold: kept in float64, rounded in the narrower dtypes as torch rounds
    k, t = kael.tensor([0.1, 1 / 3, 1e-40]), torch.tensor([0.1, 1 / 3, 1e-40])
    assert k.to(kael.float64).tolist() == t.to(torch.float64).tolist()
    k, t = kael.arange(0, 1, 0.1), torch.arange(0, 1, 0.1)
    np.testing.assert_array_equal(k.to(kael.float64).numpy(), t.to(torch.float64).numpy())
    k, t = kael.tensor([1, 3]) / 3, torch.tensor([1, 3]) / 3
    assert k.to(kael.float64).tolist() == t.to(torch.float64).tolist()


@pytest.mark.parametrize("name", FLOATING)
def test_repr_names_the_dtypes_that_are_not_the_default(default, name):
    default(name)
    for make in (lambda m: m.tensor([1.0, 2.5]), lambda m: m.tensor([1.0, 2.5], dtype=m.float32),
                 lambda m: m.tensor([1.0], dtype=m.float64), lambda m: m.tensor([]),
                 lambda m: m.tensor([], dtype=m.float32), lambda m: m.zeros(0, 2),
                 lambda m: m.zeros(0, 2, dtype=m.float64), lambda m: m.tensor([1]),
                 lambda m: m.tensor([True]), lambda m: m.tensor([1.0], dtype=m.float16)):
        assert repr(make(kael)).replace("kael", "torch") == repr(make(torch))


def test_the_default_is_float32():
    assert kael.get_default_dtype() is kael.float32
    assert torch.get_default_dtype() is torch.float32
    assert kael.finfo().dtype == "float32"


def test_get_default_dtype_returns_the_dtype_object(default):
    default("float64")
    assert kael.get_default_dtype() is kael.float64
    assert kael.get_default_dtype() is kael.double
    assert kael.finfo().dtype == "float64" == torch.finfo().dtype


@pytest.mark.parametrize("bad", ["int32", "int64", "uint8", "bool", "int16"])
def test_non_floating_dtypes_are_refused(default, bad):
    default("float64")
    with pytest.raises(TypeError) as tt:
        torch.set_default_dtype(getattr(torch, bad))
    with pytest.raises(TypeError, match=f"set_default_dtype\\(\\): only floating-point types .*kael.{bad}") as kt:
        kael.set_default_dtype(getattr(kael, bad))
    assert type(kt.value) is type(tt.value)
    # nothing changed
    assert kael.get_default_dtype() is kael.float64


@pytest.mark.parametrize("bad", ["float64", None, 1, float])
def test_non_dtypes_are_refused(bad):
    with pytest.raises(TypeError):
        torch.set_default_dtype(bad)
    with pytest.raises(TypeError, match="set_default_dtype\\(\\): expected a kael.dtype"):
        kael.set_default_dtype(bad)
    assert kael.get_default_dtype() is kael.float32


def test_a_training_step_in_float64(default):
    # A model built and trained after set_default_dtype(float64) computes in float64, as torch's.
    default("float64")
    kael.manual_seed(0)
    torch.manual_seed(0)
    km, tm = kael.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    with torch.no_grad():
        tm.weight.copy_(torch.from_numpy(km.weight.detach().numpy()))
        tm.bias.copy_(torch.from_numpy(km.bias.detach().numpy()))
    x = np.linspace(-1, 1, 8).reshape(2, 4)
    ky = km(kael.tensor(x.tolist())).sum()
    ty = tm(torch.tensor(x.tolist())).sum()
    ky.backward()
    ty.backward()
    assert ky.dtype is kael.float64 and km.weight.grad.dtype is kael.float64
    np.testing.assert_allclose(ky.item(), ty.item(), rtol=1e-14)
    np.testing.assert_allclose(km.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-14)


def test_the_setting_is_the_process_one():
    # One value for the process, seen by every thread (as torch's), set in a fresh interpreter.
    code = (
        "import threading, kael\n"
        "kael.set_default_dtype(kael.float64)\n"
        "out = []\n"
        "t = threading.Thread(target=lambda: out.append(kael.randn(2).dtype))\n"
        "t.start(); t.join()\n"
        "print(out[0], kael.get_default_dtype())\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["kael.float64", "kael.float64"]
