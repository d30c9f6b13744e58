"""Pointwise ops the registry harness (test_pointwise_registry.py) cannot drive by name: three
inputs (where, lerp), composites (masked_fill, nan_to_num, gelu), torch.nn.functional-only ops
(silu, softplus), two results (frexp) and tensor lists (broadcast_tensors), against PyTorch."""
import math
import pickle
import warnings

import pytest
import torch
import torch.nn.functional as TF

import kael
import kael.nn.functional as KF
from helpers import FLOAT_NAMES, DTYPE_NAMES, check, compare, rand_torch, to_kael

NAN, INF = math.nan, math.inf
LAYOUTS = ["contig", "T", "step", "expand"]


def _same(make, **check_kw):
    """make(lib) on torch and kael: equal results, or both raise (kael with torch's class)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            t = make(torch)
        except Exception as e:  # noqa: BLE001 - torch refuses: kael must, with the same class
            cls = RuntimeError if isinstance(e, RuntimeError) else type(e)
            with pytest.raises(cls):
                make(kael)
            return None
        k = make(kael)
    if isinstance(t, tuple):
        assert isinstance(k, tuple) and len(k) == len(t)
        for a, b in zip(k, t):
            check(a, b, **check_kw)
    else:
        check(k, t, **check_kw)
    return k


# ---------------------------------------------------------------- where

@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_where_matches_torch(dtype, layout):
    compare(lambda lib, c, x, y: lib.where(c, x, y),
            ((4, 5), "bool", layout), ((4, 5), dtype, layout), ((4, 5), dtype))
    compare(lambda lib, c, x, y: lib.where(c, x, y), ((4, 1), "bool"), ((5,), dtype, "step"), ((1, 5), dtype))
    compare(lambda lib, c, x, y: x.where(c, y), ((4, 5), "bool"), ((4, 5), dtype, layout), ((4, 5), dtype))


@pytest.mark.parametrize("a,b", [("float32", "float64"), ("int32", "int64"), ("uint8", "int8"), ("bool", "int16"),
                                 ("bfloat16", "float16"), ("bool", "bool"), ("int64", "float16")])
def test_where_promotes_all_three(a, b):
    compare(lambda lib, c, x, y: lib.where(c, x, y), ((3, 4), "bool"), ((3, 4), a), ((3, 4), b))
    compare(lambda lib, c, x, y: lib.where(c, x, y), ((3, 4), "bool"), ((), a), ((3, 4), b))  # 0-d ranks lower
    compare(lambda lib, c, x: lib.where(c, x, 2.5), ((3, 4), "bool"), ((3, 4), a))
    compare(lambda lib, c, y: lib.where(c, 7, y), ((3, 4), "bool"), ((3, 4), b))


def test_where_numbers_empty_zero_d_and_out():
    compare(lambda lib, c: lib.where(c, 1, 0), ((3, 4), "bool"))
    compare(lambda lib, c: lib.where(c, 1.5, 0), ((3, 4), "bool"))
    compare(lambda lib, c, x, y: lib.where(c, x, y), ((0, 4), "bool"), ((0, 4), "float32"), ((4,), "float32"))
    compare(lambda lib, c, x, y: lib.where(c, x, y), ((), "bool"), ((), "int64"), ((), "int64"))
    base = rand_torch((3, 4), "float32")
    c = rand_torch((3, 4), "bool")
    x = rand_torch((3, 4), "float32")
    tout, kout = base.clone(), to_kael(base)
    r = kael.where(to_kael(c), to_kael(x), 0.0, out=kout)
    assert r is kout
    check(kout, torch.where(c, x, torch.tensor(0.0), out=tout))
    # an out of another float dtype takes the cast result (torch insists on the result dtype)
    kout = kael.zeros(3, 4, dtype=kael.float64)
    kael.where(to_kael(c), to_kael(x), 0.0, out=kout)
    check(kout, torch.where(c, x, 0.0).double())


def test_where_condition_rules():
    x = kael.ones(3)
    with pytest.raises(RuntimeError, match=r"where: expected condition to be a boolean tensor, but got a tensor "
                                           r"with dtype int64"):
        kael.where(kael.tensor([1, 0, 1]), x, x)
    with pytest.raises(TypeError):
        kael.where(True, x, x)
    with pytest.warns(UserWarning, match="uint8 condition"):
        r = kael.where(kael.tensor([1, 0, 1], dtype=kael.uint8), x, kael.zeros(3))
    assert r.tolist() == [1.0, 0.0, 1.0]
    with pytest.raises(RuntimeError, match="where"):  # as torch
        kael.where(kael.tensor([True, False]), x, x)


def test_where_nan_and_signed_zero_pass_through():
    c = torch.tensor([True, False, True, False])
    x = torch.tensor([NAN, 1.0, -0.0, INF])
    y = torch.tensor([2.0, NAN, 3.0, -INF])
    k = kael.where(to_kael(c), to_kael(x), to_kael(y))
    check(k, torch.where(c, x, y))
    assert math.copysign(1, k.tolist()[2]) == -1


# ---------------------------------------------------------------- lerp

@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_lerp_matches_torch(dtype, layout):
    compare(lambda lib, a, b, w: lib.lerp(a, b, w), ((4, 5), dtype, layout), ((4, 5), dtype), ((4, 5), dtype))
    compare(lambda lib, a, b: lib.lerp(a, b, 0.3), ((4, 5), dtype, layout), ((5,), dtype))
    compare(lambda lib, a, b: a.lerp(b, 0.7), ((4, 5), dtype), ((4, 5), dtype, layout))
    compare(lambda lib, a, b: lib.lerp(a, b, -1.5), ((4, 5), dtype), ((4, 5), dtype))
    compare(lambda lib, a, b: a.lerp_(b, 0.25), ((4, 5), dtype), ((4, 5), dtype, layout), check_same=0)


def test_lerp_weights_around_a_half_and_specials():
    a = torch.tensor([0.0, 1.0, -2.0, NAN, INF, 1e30], dtype=torch.float32)
    b = torch.tensor([1.0, 3.0, 5.0, 1.0, 1.0, -1e30], dtype=torch.float32)
    for w in [0.0, 0.49999997, 0.5, 0.50000006, 1.0, 2.0, -0.5, NAN]:
        check(kael.lerp(to_kael(a), to_kael(b), w), torch.lerp(a, b, w))
    w = torch.tensor([0.0, 0.5, 1.0, 0.3, 0.7, 0.5])
    check(kael.lerp(to_kael(a), to_kael(b), to_kael(w)), torch.lerp(a, b, w))


def test_lerp_dtype_rules():
    _same(lambda lib: lib.lerp(lib.zeros(3), lib.ones(3, dtype=lib.float64), 0.5))
    _same(lambda lib: lib.lerp(lib.zeros(3), lib.ones(3), lib.tensor(0.5, dtype=lib.float64)))
    _same(lambda lib: lib.lerp(lib.zeros(3), lib.ones(3), lib.ones(3, dtype=lib.float64)))
    _same(lambda lib: lib.lerp(lib.zeros(3, dtype=lib.int64), lib.ones(3, dtype=lib.int64), 2))
    with pytest.raises(RuntimeError, match=r"lerp: expected dtype float32 for `end` but got dtype float64"):
        kael.lerp(kael.zeros(3), kael.ones(3, dtype=kael.float64), 0.5)


# ---------------------------------------------------------------- masked_fill

@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_masked_fill_matches_torch(dtype):
    value = True if dtype == "bool" else 3
    compare(lambda lib, x, m: x.masked_fill(m, value), ((4, 5), dtype, "T"), ((4, 5), "bool"))
    compare(lambda lib, x, m: lib.masked_fill(x, m, value), ((4, 5), dtype), ((5,), "bool"))
    compare(lambda lib, x, m: x.masked_fill(m, value), ((5,), dtype), ((4, 5), "bool"))  # result broadcasts
    compare(lambda lib, x, m: x.masked_fill_(m, value), ((4, 5), dtype, "step"), ((4, 1), "bool"), check_same=0)
    compare(lambda lib, x, m: x.masked_fill(m, lib.tensor(value)), ((4, 5), dtype), ((4, 5), "bool"))
    compare(lambda lib, x, m: x.masked_fill_(m, lib.tensor(value)), ((4, 5), dtype), ((4, 5), "bool"), check_same=0)
    compare(lambda lib, x, m: x.masked_fill(m, 2.7), ((4, 5), dtype), ((4, 5), "bool"))
    compare(lambda lib, x, m: x.masked_fill(m, lib.tensor(2.5)), ((4, 5), dtype), ((4, 5), "bool"))


def test_masked_fill_errors_before_writes():
    _same(lambda lib: lib.zeros(3, dtype=lib.int8).masked_fill(lib.tensor([True, False, True]), 300))
    _same(lambda lib: lib.zeros(3).masked_fill(lib.tensor([1, 0, 1]), 3))
    _same(lambda lib: lib.zeros(3).masked_fill(lib.tensor([True, False, True]), lib.tensor([1.0, 2.0])))
    _same(lambda lib: lib.zeros(3).masked_fill_(lib.tensor([[True], [False]]), 3))
    _same(lambda lib: lib.zeros(3).masked_fill(lib.tensor([True, False, True]), NAN))
    x = kael.tensor([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="masked_fill_: only supports boolean masks"):
        x.masked_fill_(kael.tensor([1, 0, 1]), 9.0)
    with pytest.raises(RuntimeError, match="masked_fill_"):
        x.masked_fill_(kael.tensor([[True], [False]]), 9.0)
    assert x.tolist() == [1.0, 2.0, 3.0]


def test_masked_fill_mask_aliasing_the_input():
    # The mask is a view of the bool tensor being filled: computed before written, as torch.
    def make(lib):
        x = lib.tensor([True, False, True, False])
        return x.masked_fill_(x, False)
    _same(make)


# ---------------------------------------------------------------- nan_to_num

SPECIALS = [NAN, INF, -INF, 1.0, -0.0, 1e30, -1e-30]


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_nan_to_num_matches_torch(dtype):
    def values(lib):
        base = lib.tensor(SPECIALS) if dtype in FLOAT_NAMES else lib.tensor([0, 1, 2, 3])
        return base.to(getattr(lib, dtype))
    for kw in [{}, {"nan": 2.0}, {"posinf": 5.0, "neginf": -5.0}, {"nan": 1e300, "posinf": -1e300},
               {"nan": 65510.0, "posinf": 65520.0}, {"neginf": 3.4028235e38}]:
        _same(lambda lib: lib.nan_to_num(values(lib), **kw))
        _same(lambda lib: values(lib).nan_to_num(**kw))

        def inplace(lib):
            x = values(lib)
            r = x.nan_to_num_(**kw)
            assert r is x
            return x
        _same(inplace)


def test_nan_to_num_in_place_on_integers_writes_nothing():
    def make(lib):
        x = lib.tensor([3, 4], dtype=lib.int64).expand(3, 2)  # would be refused as a destination
        assert x.nan_to_num_() is x
        return x
    _same(make)


def test_nan_to_num_positional_and_layouts():
    compare(lambda lib, x: lib.nan_to_num(x, 0.5, 9.0, -9.0), ((4, 5), "float32", "T"))
    t = torch.tensor([[NAN, INF], [-INF, 2.0]]).T
    check(kael.nan_to_num(to_kael(torch.tensor([[NAN, INF], [-INF, 2.0]])).T), torch.nan_to_num(t))


# ---------------------------------------------------------------- gelu, silu, softplus

@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_matches_torch(dtype, approximate):
    compare(lambda lib, x: (TF if lib is torch else KF).gelu(x, approximate=approximate), ((4, 5), dtype, "T"))
    with pytest.raises(TypeError):  # keyword-only, as in torch
        KF.gelu(kael.ones(2), approximate)


def test_gelu_specials_and_errors():
    x = torch.tensor([NAN, -INF, 0.0, -0.0, 10.0, -10.0, 1e-20, 3.0, -3.0, 5.5])
    for approximate in ("none", "tanh"):
        check(KF.gelu(to_kael(x), approximate=approximate), TF.gelu(x, approximate=approximate))
        # gelu(+inf) is +inf, as torch's scalar loop gives (its vectorised exact form gives NaN,
        # so torch's answer depends on the element's position: docs/decisions/vectorised-math.md)
        assert KF.gelu(kael.full((17,), INF), approximate=approximate).tolist() == [INF] * 17
        check(KF.gelu(to_kael(torch.tensor([INF])), approximate=approximate),
              TF.gelu(torch.tensor([INF]), approximate=approximate))
    with pytest.raises(RuntimeError, match="gelu: approximate argument must be either none or tanh"):
        KF.gelu(kael.ones(2), approximate="foo")
    with pytest.raises(TypeError):
        KF.gelu(kael.ones(2), approximate=1)
    assert not hasattr(kael, "gelu") and not hasattr(kael, "silu") and not hasattr(kael, "softplus")


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_gelu_derivative_kernels_match_torch_backward(dtype):
    x = torch.cat([torch.randn(200, dtype=torch.float64) * 3, torch.tensor([0.0, -0.0, 8.0, -8.0, NAN, -INF])])
    x = x.to(getattr(torch, dtype))
    for approximate, fn in [("none", kael._C._gelu_grad), ("tanh", kael._C._gelu_tanh_grad)]:
        expected = torch.ops.aten.gelu_backward(torch.ones_like(x), x, approximate=approximate)
        check(fn(to_kael(x)), expected)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_threshold_backward_matches_torch(dtype):
    # relu's gradient from its result, one pass: grad where self > threshold, else 0 (NaN self: grad)
    d = getattr(torch, dtype)
    x = torch.cat([torch.randn(100, dtype=torch.float64) * 3,
                   torch.tensor([0.0, -0.0, 0.25, NAN, INF, -INF, 1e-30])]).to(d)
    g = torch.cat([torch.randn(100, dtype=torch.float64), torch.tensor([1.0, 2.0, 3.0, 4.0, INF, NAN, -1.0])]).to(d)
    for threshold in (0, 0.25, -1.5):
        check(kael._C._threshold_backward(to_kael(g), to_kael(x), threshold),
              torch.ops.aten.threshold_backward(g, x, threshold))
    # broadcast and strided operands, and relu's gradient end to end
    check(kael._C._threshold_backward(to_kael(g[:6].reshape(3, 2).t()), to_kael(x[:3]), 0),
          torch.ops.aten.threshold_backward(g[:6].reshape(3, 2).t(), x[:3], 0))
    xk, xt = to_kael(x).requires_grad_(), x.clone().requires_grad_()
    kael.relu(xk).backward(to_kael(g))
    torch.relu(xt).backward(g)
    check(xk.grad, xt.grad)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_silu_and_softplus_match_torch(dtype):
    compare(lambda lib, x: (TF if lib is torch else KF).silu(x), ((4, 5), dtype, "T"))
    compare(lambda lib, x: (TF if lib is torch else KF).softplus(x), ((4, 5), dtype, "step"))
    compare(lambda lib, x: (TF if lib is torch else KF).softplus(x, 2.0, 1.0), ((4, 5), dtype))
    compare(lambda lib, x: (TF if lib is torch else KF).softplus(x, beta=0.5, threshold=3), ((4, 5), dtype))


def test_silu_inplace_and_softplus_specials():
    t = torch.tensor([NAN, INF, -INF, 0.0, 30.0, -30.0, 1e-30])
    k = to_kael(t)
    r = KF.silu(k, inplace=True)
    assert r is k
    check(k, TF.silu(t.clone(), inplace=True))
    for beta, threshold in [(1.0, 20.0), (2.0, 5.0), (-1.0, 20.0)]:
        check(KF.softplus(to_kael(t), beta, threshold), TF.softplus(t, beta, threshold))


# ---------------------------------------------------------------- logit (an optional eps over the kernel _logit)

@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("eps", [None, 0.0, 0.25, -1.0])
def test_logit_matches_torch(dtype, eps):
    # values in and around [0, 1] (the domain, its edges and the clamp), integers giving the default dtype
    compare(lambda lib, x: lib.logit(x, eps), ((4, 5), dtype, "T", (-0.5, 1.5)))
    compare(lambda lib, x: x.logit(eps=eps), ((3, 4), dtype, "step", (0.0, 1.0)))


def test_logit_specials_in_place_and_gradients():
    # repeated past two vectors: torch's scalar loop (shorter tensors) disagrees with its vectorised one
    # at -0.0 and NaN; kael gives the vectorised loop's gradient at every length
    t = torch.tensor([NAN, INF, -INF, 0.0, -0.0, 1.0, 0.5, 0.25, 0.75, 1e-30, -0.5, 1.5] * 8, dtype=torch.float64)
    for eps in [None, 0.0, 0.25, 0.5, -0.5, NAN]:
        check(kael.logit(to_kael(t), eps), torch.logit(t, eps))
        k, tt = to_kael(t), t.clone()
        assert k.logit_(eps) is k
        check(k, tt.logit_(eps))
        # the gradient of the kernel at every point, with eps and without (NaN outside [0, 1], 0 outside the clamp)
        xk, xt = to_kael(t).requires_grad_(), t.clone().requires_grad_()
        kael.logit(xk, eps).sum().backward()
        torch.logit(xt, eps).sum().backward()
        check(xk.grad, xt.grad)
    with pytest.raises(TypeError):
        kael.logit(kael.ones(2), "0.1")
    with pytest.raises(RuntimeError, match="logit_: result type float32 can't be cast to the desired output type int64"):
        kael.ones(2, dtype=kael.int64).logit_()
    with pytest.raises(RuntimeError):
        torch.ones(2, dtype=torch.int64).logit_()


# ---------------------------------------------------------------- frexp (two results)

@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_frexp_matches_torch(dtype):
    def make(lib):
        base = lib.tensor([1.5, 2.0, 0.0, -0.0, INF, -INF, NAN, 1e-40, -3.0, 1e30, 0.1])
        if dtype not in FLOAT_NAMES:
            base = lib.tensor([1, 2, 3])
        return lib.frexp(base.to(getattr(lib, dtype)))
    _same(make)
    if dtype in FLOAT_NAMES:
        compare(lambda lib, x: x.frexp(), ((4, 5), dtype, "T"))


def test_frexp_returns_a_named_tuple_like_torch():
    k = kael.frexp(kael.tensor([1.5, 4.0]))
    t = torch.frexp(torch.tensor([1.5, 4.0]))
    assert type(k).__name__ == type(t).__name__ == "frexp"
    assert type(k).__module__ == "kael.return_types" and type(t).__module__ == "torch.return_types"
    assert isinstance(k, tuple) and len(k) == 2 and k.n_fields == 2
    assert k.mantissa is k[0] and k.exponent is k[1]
    m, e = k
    check(m, t.mantissa)
    check(e, t.exponent)
    assert type(k) is kael.return_types.frexp
    assert repr(k).startswith("kael.return_types.frexp(\nmantissa=tensor(")
    assert pickle.loads(pickle.dumps(type(k))) is kael.return_types.frexp  # found by name


# ---------------------------------------------------------------- broadcast_tensors (Tensor[])

def test_broadcast_tensors_matches_torch():
    def make(lib):
        a, b, c = lib.zeros(2, 1), lib.arange(3.0), lib.tensor(5)
        return lib.broadcast_tensors(a, b, c)
    k = _same(make)
    assert type(k) is tuple
    with pytest.raises(RuntimeError, match=r"broadcast_tensors: shapes \[2, 1\] and \[3, 2\] are not broadcastable"):
        kael.broadcast_tensors(kael.zeros(2, 1), kael.zeros(3, 2))  # as torch
    with pytest.raises(RuntimeError):
        torch.broadcast_tensors(torch.zeros(2, 1), torch.zeros(3, 2))
    _same(lambda lib: lib.broadcast_tensors())
    _same(lambda lib: lib.broadcast_tensors(lib.ones(2)))


def test_tensor_list_arguments():
    a = kael.arange(3.0)
    r = kael.broadcast_tensors(*[a, kael.zeros(2, 1)])
    assert r[0].shape == (2, 3) and r[0]._base is a  # views, no copies
    with pytest.raises(TypeError, match="broadcast_tensors"):
        kael.broadcast_tensors(a, 3)
    # a list that changes after the call does not change the result
    items = [a, kael.zeros(2, 1)]
    out = kael.broadcast_tensors(*items)
    items.clear()
    assert [t.shape for t in out] == [(2, 3), (2, 3)]
