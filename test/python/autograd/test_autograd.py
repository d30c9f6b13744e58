"""Autograd behaviour against PyTorch: the graph API, retain_graph, double backward, version
counters, in-place ops and views, hooks, grad mode (thread-local, restored on exceptions), the
GIL during backward, anomaly detection, custom Functions, and an MLP trained on XOR."""
import gc
import re
import threading

import numpy as np
import pytest
import torch

import kael
from helpers import check, run_in_threads, to_kael, where_the_gil_was_released


def pair(*shape, seed=0, dtype="float32"):
    t = torch.tensor(np.random.default_rng(seed).uniform(-2, 2, size=shape), dtype=getattr(torch, dtype))
    k = to_kael(t)
    return t.requires_grad_(), k.requires_grad_()


# ---------------------------------------------------------------- attributes

def test_leaf_attributes():
    k = kael.randn(5, 3, requires_grad=True)
    assert k.requires_grad and k.is_leaf and k.grad_fn is None and k.grad is None
    y = k * 2
    assert y.requires_grad and not y.is_leaf
    assert y.grad_fn.name() == "MulBackward0"
    assert re.fullmatch(r"<MulBackward0 object at 0x[0-9a-f]+>", repr(y.grad_fn))
    assert y.grad_fn is y.grad_fn
    (fn, nr), (none, _) = y.grad_fn.next_functions
    assert fn.name() == "AccumulateGrad" and nr == 0 and none is None
    assert fn.variable is k
    t = torch.randn(5, 3, requires_grad=True)
    assert type(t * 2).__name__ and (t * 2).grad_fn.name() == "MulBackward0"


def test_factories_and_tensor_take_requires_grad():
    for k in (kael.zeros(2, 3, requires_grad=True), kael.ones(2, requires_grad=True),
              kael.tensor([1.0, 2.0], requires_grad=True), kael.rand(2, requires_grad=True),
              kael.full((2,), 3.0, requires_grad=True), kael.zeros_like(kael.ones(2), requires_grad=True)):
        assert k.requires_grad and k.is_leaf
    assert not kael.zeros(2).requires_grad
    with pytest.raises(RuntimeError, match="floating point"):
        kael.tensor([1, 2], requires_grad=True)
    with pytest.raises(RuntimeError, match="floating point"):
        torch.tensor([1, 2], requires_grad=True)


def test_requires_grad_setter_and_non_leaf():
    k = kael.ones(3)
    k.requires_grad = True
    assert k.requires_grad
    y = k * 2
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad = False
    with pytest.raises(RuntimeError, match="leaf"):
        (torch.ones(3, requires_grad=True) * 2).requires_grad = False
    assert k.requires_grad_(False) is k and not k.requires_grad


def test_grad_is_settable_and_identity_is_preserved():
    t, k = pair(3)
    (k * 2).sum().backward()
    assert k.grad is k.grad
    g = k.grad
    (k * 3).sum().backward()
    assert k.grad is g  # accumulated in place
    check(k.grad, torch.full((3,), 5.0))
    k.grad = None
    assert k.grad is None
    new = kael.ones(3)
    k.grad = new
    assert k.grad is new
    with pytest.raises(RuntimeError, match="different size"):
        k.grad = kael.ones(4)


def test_detach():
    _, k = pair(3)
    y = k * 2
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None
    y.detach_()
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf


# ---------------------------------------------------------------- engine

def test_backward_matches_torch_with_shared_subexpressions():
    t, k = pair(4, 3)
    tw, kw = pair(3, 2, seed=1)

    def f(L, x, w):
        h = (x @ w).tanh()
        return (h * h + h.sigmoid() * x.sum(1, keepdim=True)).mean()

    f(torch, t, tw).backward()
    f(kael, k, kw).backward()
    check(k.grad, t.grad)
    check(kw.grad, tw.grad)


def test_broadcasting_reduces_grads_to_input_shapes():
    t1, k1 = pair(3, 1)
    t2, k2 = pair(4, seed=1)
    (t1 * t2 + t2).sum().backward()
    (k1 * k2 + k2).sum().backward()
    assert k1.grad.shape == (3, 1) and k2.grad.shape == (4,)
    check(k1.grad, t1.grad)
    check(k2.grad, t2.grad)


def test_implicit_grad_only_for_scalars():
    _, k = pair(3)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (k * 2).backward()
    t, _ = pair(3)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (t * 2).backward()
    (k * 2).backward(kael.ones(3))
    check(k.grad, torch.full((3,), 2.0))


def test_retain_graph():
    _, k = pair(3)
    y = (k * k).sum()
    y.backward(retain_graph=True)
    y.backward()
    check(k.grad, 4 * torch.tensor(k.tolist()))
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()
    t, _ = pair(3)
    ty = (t * t).sum()
    ty.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        ty.backward()


def test_backward_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        kael.ones(2).sum().backward()


def test_autograd_grad_and_allow_unused():
    t, k = pair(3)
    tu, ku = pair(3, seed=1)
    (tg,) = torch.autograd.grad((t ** 3).sum(), t)
    (kg,) = kael.autograd.grad((k ** 3).sum(), k)
    check(kg, tg)
    assert k.grad is None  # nothing accumulates
    with pytest.raises(RuntimeError, match="allow_unused"):
        kael.autograd.grad((k * 2).sum(), [k, ku])
    g1, g2 = kael.autograd.grad((k * 2).sum(), [k, ku], allow_unused=True)
    assert g2 is None
    check(g1, torch.full((3,), 2.0))


def test_grad_of_non_leaf_input():
    t, k = pair(3)
    th = t * 2
    kh = k * 2
    (tg,) = torch.autograd.grad((th * th).sum(), th)
    (kg,) = kael.autograd.grad((kh * kh).sum(), kh)
    check(kg, tg)


@pytest.mark.parametrize("fn", [
    lambda L, x: (x.sin() * x.exp()).sum(),
    lambda L, x: (x @ x.T).sum(),
    lambda L, x: (x * x).sum(),
    lambda L, x: (x * x).mean(),
    lambda L, x: (L.nn.functional.softmax(x, dim=1) * x).sum(),
    lambda L, x: (x.tanh() / (1 + x * x)).sum(),
], ids=["pointwise", "matmul", "sum", "mean", "softmax", "quotient"])
def test_double_backward(fn):
    t, k = pair(3, 3, dtype="float64")
    (tg,) = torch.autograd.grad(fn(torch, t), t, create_graph=True)
    (kg,) = kael.autograd.grad(fn(kael, k), k, create_graph=True)
    check(kg, tg)
    assert kg.requires_grad
    (tgg,) = torch.autograd.grad((tg * tg).sum(), t)
    (kgg,) = kael.autograd.grad((kg * kg).sum(), k)
    check(kgg, tgg)


def test_backward_create_graph_accumulates_differentiable_grad():
    _, k = pair(3, dtype="float64")
    (k ** 3).sum().backward(create_graph=True)
    assert k.grad.requires_grad
    g = k.grad
    (gg,) = kael.autograd.grad(g.sum(), k)
    check(gg, 6 * torch.tensor(k.tolist(), dtype=torch.float64))


# ---------------------------------------------------------------- versions and in-place

def test_modified_saved_tensor_raises_with_versions():
    _, k = pair(3)
    a = k * 1
    y = a * a
    a.add_(1)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation.*MulBackward0.*version 1; expected "
                                           r"version 0"):
        y.sum().backward()
    t, _ = pair(3)
    ta = t * 1
    ty = ta * ta
    ta.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        ty.sum().backward()


def test_leaf_inplace_raises():
    t, k = pair(3)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        k.add_(1)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        t.add_(1)
    with kael.no_grad():
        k.add_(1)  # allowed without grad mode (an optimizer step)


def test_inplace_on_non_leaf_rebases_history():
    t, k = pair(3)
    ty = t * 2
    ty.add_(1)
    ty.mul_(t)
    ty.sin_()
    ky = k * 2
    ky.add_(1)
    ky.mul_(k)
    ky.sin_()
    assert ky.grad_fn.name() == "SinBackward0"
    assert ky.grad_fn.next_functions[0][0].name() == "MulBackward0"
    ty.sum().backward()
    ky.sum().backward()
    check(k.grad, t.grad)


def test_inplace_on_view_of_non_leaf():
    t, k = pair(3, 4)
    tx = t * 1
    kx = k * 1
    tx[0].mul_(2)
    kx[0].mul_(2)
    tx[1:, 1].exp_()
    kx[1:, 1].exp_()
    (tx * tx).sum().backward()
    (kx * kx).sum().backward()
    check(k.grad, t.grad)


def test_inplace_on_view_of_leaf_raises():
    _, k = pair(3, 4)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        k[0].mul_(2)


def test_setitem_into_tensor_without_grad():
    t, k = pair(4)
    tz = torch.zeros(2, 4)
    kz = kael.zeros(2, 4)
    tz[1] = t * 3
    kz[1] = k * 3
    assert kz.requires_grad
    (tz * tz).sum().backward()
    (kz * kz).sum().backward()
    check(k.grad, t.grad)


def test_out_argument_with_grad_raises():
    _, k = pair(3)
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
        kael.add(k, k, out=kael.empty(3))


def test_non_differentiable_op_raises_instead_of_dropping_history():
    k = kael.ones(3, requires_grad=True)
    assert not (k > 0).requires_grad  # boolean results are fine
    index = kael.tensor([0, 1, 2])
    with pytest.raises(RuntimeError, match="scatter: the derivative is not implemented"):
        k.scatter(0, index, k, reduce="add")
    with kael.no_grad():
        k.scatter(0, index, k, reduce="add")


# ---------------------------------------------------------------- hooks and retain_grad

def test_hooks_replace_the_gradient_and_remove():
    t, k = pair(3)
    seen = []
    h = k.register_hook(lambda g: seen.append(g.tolist()) or g * 10)
    (k * 2).sum().backward()
    assert seen == [[2.0, 2.0, 2.0]]
    check(k.grad, torch.full((3,), 20.0))
    h.remove()
    k.grad = None
    (k * 2).sum().backward()
    check(k.grad, torch.full((3,), 2.0))
    y = k * 3
    y.register_hook(lambda g: g + 1)
    k.grad = None
    y.sum().backward()
    check(k.grad, torch.full((3,), 6.0))


def test_retain_grad():
    t, k = pair(3)
    ty, ky = t * 2, k * 2
    ty.retain_grad()
    ky.retain_grad()
    assert ky.retains_grad
    (ty * ty).sum().backward()
    (ky * ky).sum().backward()
    check(ky.grad, ty.grad)
    kz = k * 5
    with pytest.warns(UserWarning, match="not a leaf"):
        assert kz.grad is None


def test_hook_error_propagates():
    _, k = pair(3)

    def bad(g):
        raise ValueError("hook failed")

    k.register_hook(bad)
    with pytest.raises(ValueError, match="hook failed"):
        (k * 2).sum().backward()


# ---------------------------------------------------------------- grad mode

def test_no_grad_and_enable_grad():
    _, k = pair(3)
    with kael.no_grad():
        assert not kael.is_grad_enabled()
        y = k * 2
        with kael.enable_grad():
            z = k * 2
    assert not y.requires_grad and z.requires_grad
    assert kael.is_grad_enabled()

    @kael.no_grad()
    def f(x):
        return x * 2

    assert not f(k).requires_grad
    kael.set_grad_enabled(False)
    assert not kael.is_grad_enabled()
    kael.set_grad_enabled(True)
    with kael.set_grad_enabled(False):
        assert not (k * 2).requires_grad
    assert kael.is_grad_enabled()


def test_no_grad_reentrant_and_restored_after_exception():
    ng = kael.no_grad()
    with ng:
        with ng:
            assert not kael.is_grad_enabled()
        assert not kael.is_grad_enabled()
    assert kael.is_grad_enabled()
    with pytest.raises(KeyError):
        with kael.no_grad():
            raise KeyError("x")
    assert kael.is_grad_enabled()


def test_inference_mode():
    _, k = pair(3)
    with kael.inference_mode():
        assert not (k * 2).requires_grad
        assert kael.is_inference_mode_enabled()
    assert kael.is_grad_enabled() and not kael.is_inference_mode_enabled()


def test_grad_mode_is_thread_local():
    results = {}
    barrier = threading.Barrier(2)

    def no_grad_thread():
        with kael.no_grad():
            barrier.wait()
            results["off"] = kael.is_grad_enabled()
            barrier.wait()

    def grad_thread():
        barrier.wait()
        results["on"] = kael.is_grad_enabled()
        results["records"] = (kael.ones(2, requires_grad=True) * 2).requires_grad
        barrier.wait()

    ts = [threading.Thread(target=no_grad_thread), threading.Thread(target=grad_thread)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert results == {"off": False, "on": True, "records": True}


# ---------------------------------------------------------------- threads and the GIL

def test_backward_releases_the_gil():
    # another Python thread runs while the engine runs (where_the_gil_was_released: no timing);
    # the control, a C call that holds the GIL (sorting floats), lets it run nowhere inside
    x = kael.randn(256, 256, requires_grad=True)
    y = x
    for _ in range(30):
        y = (y @ x).tanh()
    loss = y.sum()
    where = where_the_gil_was_released(lambda: loss.backward(retain_graph=True))
    assert where is not None, "another Python thread made no progress during backward"
    # the innermost Python frame is the caller's: Tensor.backward runs the engine from C++
    assert "loss.backward(retain_graph=True)" in where.line, where
    assert x.grad is not None
    floats = [float(i % 1000) for i in range(100_000)]
    assert where_the_gil_was_released(lambda: sorted(floats), attempts=20) is None


def test_two_threads_backward_on_independent_graphs():
    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(20):
            v = rng.uniform(-1, 1, size=(16, 16))
            t = torch.tensor(v, requires_grad=True)
            k = kael.tensor(v, requires_grad=True)
            ((t @ t).sin() * t).sum().backward()
            ((k @ k).sin() * k).sum().backward()
            check(k.grad, t.grad)

    run_in_threads(work, range(2))


# ---------------------------------------------------------------- anomaly detection and explain

def test_anomaly_detection_names_node_and_forward_site():
    k = kael.tensor([-1.0, 1.0], requires_grad=True)
    with kael.autograd.detect_anomaly():
        y = k.sqrt()  # sqrt of -1: NaN, and its backward divides by it
        with pytest.raises(RuntimeError) as info:
            y.sum().backward()
    msg = str(info.value)
    assert "SqrtBackward0" in msg and "nan" in msg
    assert "test_anomaly_detection_names_node_and_forward_site" in msg and "k.sqrt()" in msg
    assert not kael.autograd.is_anomaly_enabled()


def test_explain_and_graphviz():
    _, k = pair(2, 3)
    y = (k * 2).sum()
    text = kael.autograd.explain(y)
    assert "SumBackward0" in text and "MulBackward0" in text and "AccumulateGrad" in text
    assert "[2, 3]" in text
    dot = kael.autograd.graphviz(y)
    assert dot.startswith("digraph") and "SumBackward0" in dot and "->" in dot


# ---------------------------------------------------------------- custom Functions

class Exp(kael.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        r = x.exp()
        ctx.save_for_backward(r)
        return r

    @staticmethod
    def backward(ctx, g):
        (r,) = ctx.saved_tensors
        return g * r


class ScaleAndIndex(kael.autograd.Function):
    @staticmethod
    def forward(ctx, x, s):
        ctx.s = s
        idx = kael.tensor([0, 1])
        ctx.mark_non_differentiable(idx)
        return x * s, idx

    @staticmethod
    def backward(ctx, g, _):
        assert ctx.needs_input_grad == (True, False)
        return g * ctx.s, None


def test_custom_function():
    t, k = pair(3)
    y = Exp.apply(k)
    assert y.grad_fn.name() == "ExpBackward"
    (y * 2).sum().backward()
    check(k.grad, 2 * t.detach().exp())
    k.grad = None
    out, idx = ScaleAndIndex.apply(k, 3.0)
    assert not idx.requires_grad and out.requires_grad
    out.sum().backward()
    check(k.grad, torch.full((3,), 3.0))


def test_custom_function_saved_tensor_modified():
    _, k = pair(3)
    y = Exp.apply(k * 1)
    with kael.no_grad():
        y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_gradcheck_reports_a_wrong_gradient():
    class Wrong(kael.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * x

        @staticmethod
        def backward(ctx, g):
            return g * 3

    x = kael.tensor([0.5, 1.5], dtype=kael.float64, requires_grad=True)
    assert kael.autograd.gradcheck(lambda v: v * v, (x,))
    assert not kael.autograd.gradcheck(Wrong.apply, (x,), raise_exception=False)
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        kael.autograd.gradcheck(Wrong.apply, (x,))


# ---------------------------------------------------------------- training

def test_xor_mlp_trains_with_sgd():
    kael.manual_seed(0)
    x = kael.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    y = kael.tensor([[0.0], [1.0], [1.0], [0.0]])
    w1 = (kael.randn(2, 8) * 1.0).requires_grad_()
    b1 = kael.zeros(8, requires_grad=True)
    w2 = (kael.randn(8, 1) * 0.5).requires_grad_()
    b2 = kael.zeros(1, requires_grad=True)
    params = [w1, b1, w2, b2]
    for _ in range(3000):
        h = (x @ w1 + b1).tanh()
        out = (h @ w2 + b2).sigmoid()
        loss = ((out - y) ** 2).mean()
        for p in params:
            p.grad = None
        loss.backward()
        with kael.no_grad():
            for p in params:
                p.sub_(p.grad * 1.0)
    assert loss.item() < 0.01, loss.item()


def test_graph_is_freed():
    import weakref
    _, k = pair(3)
    y = (k * 2).exp()
    ref = weakref.ref(y)
    node_name = y.grad_fn.name()
    assert node_name == "ExpBackward0"
    del y
    gc.collect()
    assert ref() is None


REPR_CASES = [
    lambda L: L.ones(2, requires_grad=True),
    lambda L: L.ones(2, requires_grad=True) * 2,
    lambda L: (L.ones(2, requires_grad=True) * 2).sum(),
    lambda L: L.ones(2, dtype=L.float64, requires_grad=True) * 2,
    lambda L: L.tensor([-1.2345 + i for i in range(7)], dtype=L.float64, requires_grad=True),  # dtype wraps
    lambda L: L.tensor([-1.2345 + i for i in range(5)], dtype=L.float64, requires_grad=True) * 3,  # grad_fn wraps
    lambda L: L.tensor([-1.2345 + i for i in range(8)], requires_grad=True) * 3,
    lambda L: L.arange(30.).reshape(3, 10).requires_grad_() * 1,
    lambda L: L.arange(300.).requires_grad_() * 1,  # summarised rows
    lambda L: L.arange(12.).reshape(3, 4).requires_grad_().T,
    lambda L: (L.ones(2, requires_grad=True) * 2).detach(),
]


@pytest.mark.parametrize("i", range(len(REPR_CASES)))
def test_repr_shows_grad_fn_and_requires_grad_as_torch(i):
    make = REPR_CASES[i]
    assert repr(make(kael)).replace("kael.", "torch.") == repr(make(torch))
    assert str(make(kael)).replace("kael.", "torch.") == str(make(torch))
