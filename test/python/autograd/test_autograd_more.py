"""Autograd against PyTorch: ops with several results (values and indices), assignment through
advanced indexing (index_put), double backward through the backward kernels (gelu, embedding,
cross_entropy), inference tensors, Functions that save their own output, backward(inputs=)."""
import gc
import weakref

import numpy as np
import pytest
import torch

import kael
from helpers import check, to_kael


def rand(*shape, seed=0, dtype="float64", lo=-2.0, hi=2.0):
    """(torch leaf, kael leaf) with the same values, both requiring grad."""
    t = torch.tensor(np.random.default_rng(seed).uniform(lo, hi, size=shape), dtype=getattr(torch, dtype))
    return t.clone().requires_grad_(), to_kael(t).requires_grad_()


def const(*shape, seed=10, dtype="float64"):
    t = torch.tensor(np.random.default_rng(seed).uniform(-1, 1, size=shape), dtype=getattr(torch, dtype))
    return t, to_kael(t)


def F(lib):
    return lib.nn.functional


# ---------------------------------------------------------------- ops with several results

def test_values_get_a_node_and_indices_none():
    t, k = rand(3, 4)
    for (kv, ki), (tv, ti) in [(k.max(1), t.max(1)), (k.sort(0), t.sort(0)), (k.topk(2), t.topk(2)),
                               (kael.min(k, 1, keepdim=True), torch.min(t, 1, keepdim=True))]:
        check(kv, tv)
        check(ki, ti)
        assert kv.requires_grad and kv.grad_fn is not None and not kv.is_leaf
        assert not ki.requires_grad and ki.grad_fn is None and ti.grad_fn is None
        # the node's edge leads to the leaf
        (acc, nr), = kv.grad_fn.next_functions
        assert acc.name() == "AccumulateGrad" and acc.variable is k and nr == 0
    m, e = kael.frexp(k)
    assert m.requires_grad and not e.requires_grad and m.grad_fn.name() == "FrexpBackward0"
    assert torch.frexp(t).mantissa.grad_fn.name() == "FrexpBackward0"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sort_values_and_indices_used_together(dtype):
    t, k = rand(3, 5, seed=1, dtype=dtype)
    out = []
    for L, x in ((torch, t), (kael, k)):
        v, i = x.sort(1, descending=True)
        w, j = x.topk(3, dim=0, largest=False)
        y = (v * v).sum() + x.gather(1, i).sum() * 2 + (w.exp() * j).sum()
        y.backward()
        out.append(x.grad)
    check(out[1], out[0])


def test_max_dim_keepdim_non_contiguous_against_torch_and_gradcheck():
    tb, kb = rand(4, 3, 5, seed=2)
    t, k = tb.transpose(0, 2), kb.transpose(0, 2)  # (5, 3, 4), non-contiguous
    assert not k.is_contiguous()
    go_t, go_k = const(5, 1, 4)
    for keepdim in (True, False):
        tb.grad = None
        kb.grad = None
        tv, _ = t.max(1, keepdim=keepdim)
        kv, _ = k.max(1, keepdim=keepdim)
        g = go_t if keepdim else go_t.squeeze(1)
        tv.backward(g)
        kv.backward(to_kael(g))
        check(kb.grad, tb.grad)
        assert kael.autograd.gradcheck(lambda x: x.transpose(0, 2).max(1, keepdim=keepdim).values, (kb,))
        assert kael.autograd.gradcheck(lambda x: x.transpose(0, 2).min(-1, keepdim=keepdim).values, (kb,))


def test_multi_output_double_backward():
    t, k = rand(3, 4, seed=3)
    r_t, r_k = const(3, 4)
    for L, x, r in ((torch, t, r_t), (kael, k, r_k)):
        v, _ = x.topk(2, dim=1)
        s, _ = x.sort(0)
        y = (v ** 3).sum() + (s.sin() * s).sum()
        (g,) = L.autograd.grad(y, x, create_graph=True)
        assert g.requires_grad
        (g * r).sum().backward()
    check(k.grad, t.grad)

    def first(x):
        with kael.enable_grad():
            v, _ = x.max(0)
            return kael.autograd.grad((v ** 3).sum(), x, create_graph=True)[0]
    assert kael.autograd.gradcheck(first, (k.detach().requires_grad_(),))


def test_unused_values_and_freed_graph():
    t, k = rand(3, 4, seed=4)
    kv, ki = k.max(1)
    (kv * 0 + 1).sum().backward(retain_graph=True)
    check(k.grad, torch.zeros(3, 4, dtype=torch.float64))
    kv.sum().backward()
    tv, _ = t.max(1)
    tv.sum().backward()
    check(k.grad, t.grad)
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        kv.sum().backward()


# ---------------------------------------------------------------- t[idx] = v (index_put)

def _key(L, spec):
    """A key from a spec: lists stay lists, ("t", [...]) becomes a tensor of L, tuples recurse."""
    if isinstance(spec, tuple) and spec and spec[0] == "t":
        return L.tensor(spec[1])
    if isinstance(spec, tuple):
        return tuple(_key(L, s) for s in spec)
    return spec


SETITEM = [
    pytest.param(("t", [0, 2]), (2, 3), id="int-tensor"),
    pytest.param([2, 0], (2, 3), id="list"),
    pytest.param(("t", [True, False, True, True]), (3, 3), id="bool-mask"),
    pytest.param(("t", [[True, False, True], [False, False, True], [True, True, False], [False] * 3]), (5,),
                 id="bool-mask-2d"),
    pytest.param([1, 3], (3,), id="broadcast-row"),
    pytest.param(("t", [True, False, False, True]), (1,), id="mask-broadcast"),
    pytest.param([0, 1], (), id="0-d-value"),
    pytest.param((slice(None), [0, 2]), (4, 2), id="slice-then-index"),
    pytest.param((slice(1, None), ("t", [2, 0])), (3, 1), id="slice-then-index-broadcast"),
    pytest.param(([0, 3], [1, 2]), (2,), id="two-indices"),
    pytest.param(([[0], [3]], [1, 2]), (2, 2), id="broadcast-indices"),
    pytest.param(("t", [1, 1]), (2, 3), id="duplicates"),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("spec,vshape", SETITEM)
def test_setitem_gradients_match_torch(spec, vshape, dtype):
    at, ak = rand(4, 3, seed=5, dtype=dtype)
    vt, vk = rand(*vshape, seed=6, dtype=dtype)
    wt, wk = const(4, 3, dtype=dtype)
    xt = at.clone()
    xt[_key(torch, spec)] = vt
    xk = ak.clone()
    xk[_key(kael, spec)] = vk
    assert xk.requires_grad and xk.grad_fn is not None
    if spec != ("t", [1, 1]):  # which duplicate write wins is unspecified in torch
        check(xk, xt)
    (xt * wt).sum().backward()
    (xk * wk).sum().backward()
    check(ak.grad, at.grad)
    check(vk.grad, vt.grad)


def test_setitem_with_a_number_and_augmented_assignment():
    at, ak = rand(4, 3, seed=7)
    vt, vk = rand(2, 3, seed=8)
    wt, wk = const(4, 3)
    for L, a, v, w in ((torch, at, vt, wt), (kael, ak, vk, wk)):
        x = a * 1
        x[L.tensor([True, False, False, True])] = 5.0
        x[[1, 2]] += v * v
        x[:, [0]] *= 3
        (x * w).sum().backward()
    check(ak.grad, at.grad)
    check(vk.grad, vt.grad)


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_functional_and_in_place(accumulate):
    at, ak = rand(5, 2, seed=9)
    vt, vk = rand(4, 2, seed=10)
    wt, wk = const(5, 2)
    for L, a, v, w in ((torch, at, vt, wt), (kael, ak, vk, wk)):
        i = L.tensor([4, 0, 4, 1])
        y = a.index_put((i,), v, accumulate=accumulate)
        z = (a * 2).index_put_((i,), v.exp(), accumulate=accumulate)
        (y * w).sum().backward(retain_graph=True)
        if accumulate:  # with duplicates and no accumulation, torch picks one write (unspecified)
            (z * w).sum().backward()
    check(ak.grad, at.grad)
    check(vk.grad, vt.grad)
    if accumulate:
        ins = (ak.detach().requires_grad_(), vk.detach().requires_grad_())
        idx = kael.tensor([4, 0, 4, 1])
        assert kael.autograd.gradcheck(lambda a, v: a.index_put((idx,), v, accumulate=True), ins)


def test_setitem_on_a_leaf_that_requires_grad_raises():
    at, ak = rand(3)
    for x in (at, ak):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
            x[[0]] = 1.0


def test_setitem_double_backward():
    at, ak = rand(4, seed=11)
    vt, vk = rand(2, seed=12)
    for L, a, v in ((torch, at, vt), (kael, ak, vk)):
        x = a * a
        x[L.tensor([1, 3])] = v * v * v
        (ga, gv) = L.autograd.grad((x * x).sum(), (a, v), create_graph=True)
        (ga.sum() + gv.sum()).backward()
    check(ak.grad, at.grad)
    check(vk.grad, vt.grad)


# ---------------------------------------------------------------- double backward of backward kernels

def _double_backward(L, f, x, go, r):
    """First gradient of f at x against go (with create_graph), then the gradient of <g, r>."""
    y = f(L, x)
    (g,) = L.autograd.grad(y, x, go, create_graph=True)
    (g * r).sum().backward()
    return g


def _gradgradcheck(f, x, go):
    """Finite differences of the first gradient (as a function of x and go) against autograd's
    second derivatives."""
    def first(x_, go_):
        with kael.enable_grad():
            return kael.autograd.grad(f(kael, x_), x_, go_, create_graph=True)[0]
    return kael.autograd.gradcheck(first, (x, go))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gelu_double_backward(approximate, dtype):
    def f(L, x):
        return F(L).gelu(x, approximate=approximate)
    t, k = rand(7, seed=13, dtype=dtype, lo=-4, hi=4)
    got, gok = rand(7, seed=14, dtype=dtype)
    rt, rk = const(7, dtype=dtype)
    check(_double_backward(kael, f, k, gok, rk), _double_backward(torch, f, t, got, rt))
    check(k.grad, t.grad)
    check(gok.grad, got.grad)
    if dtype == "float64":
        assert _gradgradcheck(f, k.detach().requires_grad_(), gok.detach().requires_grad_())
        # and once more: the second derivative is itself differentiable
        x = k.detach().requires_grad_()
        (g,) = kael.autograd.grad(f(kael, x).sum(), x, create_graph=True)
        (h,) = kael.autograd.grad(g.sum(), x, create_graph=True)
        (h3,) = kael.autograd.grad(h.sum(), x)
        xt = t.detach().requires_grad_()
        (gt,) = torch.autograd.grad(f(torch, xt).sum(), xt, create_graph=True)
        (ht,) = torch.autograd.grad(gt.sum(), xt, create_graph=True)
        (h3t,) = torch.autograd.grad(ht.sum(), xt)
        check(h3, h3t)


@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_double_backward(padding_idx):
    idx_t = torch.tensor([[0, 2, 2], [5, 1, 0]])
    idx_k = to_kael(idx_t)
    wt, wk = rand(6, 3, seed=15)
    got, gok = rand(2, 3, 3, seed=16)
    rt, rk = const(6, 3)
    out = []
    for L, w, go, r, idx in ((torch, wt, got, rt, idx_t), (kael, wk, gok, rk, idx_k)):
        y = F(L).embedding(idx, w, padding_idx=padding_idx)
        (g,) = L.autograd.grad(y, w, go, create_graph=True)
        assert g.requires_grad
        (g * r).sum().backward()
        out.append((g, go.grad))
    check(out[1][0], out[0][0])
    check(out[1][1], out[0][1])
    assert wk.grad is None and wt.grad is None  # the weight's gradient does not depend on the weight
    w = wk.detach().requires_grad_()

    def first(go_):
        with kael.enable_grad():
            y = F(kael).embedding(idx_k, w, padding_idx=padding_idx)
            return kael.autograd.grad(y, w, go_, create_graph=True)[0]
    assert kael.autograd.gradcheck(first, (gok.detach().requires_grad_(),))


CE = [
    pytest.param((4, 5), [1, 0, 4, 2], {}, id="plain"),
    pytest.param((4, 5), [1, 0, 4, 2], {"ignore_index": 0, "label_smoothing": 0.1}, id="ignore-smoothing"),
    pytest.param((2, 4, 3), [[0, 3, 1], [2, 2, 0]], {"label_smoothing": 0.2}, id="3-d"),
    pytest.param((5,), 3, {}, id="1-d"),
    pytest.param((3, 4), "probs", {"label_smoothing": 0.1}, id="probabilities"),
]


@pytest.mark.parametrize("reduction", ["none", "mean"])
@pytest.mark.parametrize("shape,target,kw", CE)
def test_cross_entropy_double_backward(shape, target, kw, reduction):
    xt, xk = rand(*shape, seed=17)
    if target == "probs":
        p = torch.softmax(torch.tensor(np.random.default_rng(18).normal(size=shape)), 1)
        tt, tk = p, to_kael(p)
    else:
        tt = torch.tensor(target)
        tk = to_kael(tt)
    rt, rk = const(*shape)
    loss_shape = torch.nn.functional.cross_entropy(xt, tt, reduction="none", **kw).shape
    got, gok = rand(*loss_shape, seed=19)
    if reduction == "mean":
        got, gok = torch.tensor(1.5, dtype=torch.float64, requires_grad=True), kael.tensor(1.5, dtype=kael.float64,
                                                                                        requires_grad=True)

    def f(L, x):
        return F(L).cross_entropy(x, tt if L is torch else tk, reduction=reduction, **kw)
    check(_double_backward(kael, f, xk, gok, rk), _double_backward(torch, f, xt, got, rt))
    check(xk.grad, xt.grad)
    check(gok.grad, got.grad)
    assert _gradgradcheck(f, xk.detach().requires_grad_(), gok.detach().requires_grad_())


def test_cross_entropy_losses_backward_registry_entry_is_differentiable():
    # the kernel behind the composite, called directly
    xt, xk = rand(3, 4, seed=20)
    got, gok = rand(3, seed=21)
    t = torch.tensor([2, 0, 3])
    g = kael.cross_entropy_losses_backward(gok, xk, to_kael(t), -100, 0.0)
    assert g.grad_fn.name() == "CrossEntropyLossesBackwardBackward0"
    g.sum().backward()
    (gt,) = torch.autograd.grad(torch.nn.functional.cross_entropy(xt, t, reduction="none"), xt, got,
                                create_graph=True)
    gt.sum().backward()
    check(xk.grad, xt.grad)
    check(gok.grad, got.grad)


# ---------------------------------------------------------------- inference mode

def _error(fn):
    """The message of the RuntimeError fn raises, or None."""
    try:
        fn()
    except RuntimeError as e:
        return str(e)
    return None


def test_inference_tensors_match_torch():
    seen = {}
    for L in (torch, kael):
        r = seen[L] = {}
        n = L.ones(3)
        with L.inference_mode():
            x = L.ones(3)
            x2 = L.full((3,), 3.0)
            v = x[1:]
            nv = n[1:]
            x.add_(1)
            v.mul_(2)
            n.add_(1)  # a normal tensor keeps counting
            r["in"] = (x.is_inference(), v.is_inference(), nv.is_inference(), n.is_inference(), n._version > 0,
                       v._is_view(), v._base is x, nv._base is n, x.tolist())
            r["requires_grad_inside"] = L.ones(2).requires_grad_().requires_grad
        r["out"] = (x.is_inference(), (x + 1).is_inference(), x.clone().is_inference(), x[:1].is_inference())
        r["version"] = _error(lambda: x._version)
        r["inplace"] = _error(lambda: x.add_(1))
        r["inplace_view"] = _error(lambda: x[:1].fill_(0))
        r["copy"] = _error(lambda: x.copy_(L.zeros(3)))
        r["requires_grad"] = _error(lambda: x.requires_grad_())
        if L is kael:  # torch writes before it raises; kael checks first
            assert x.tolist() == [2.0, 4.0, 4.0]
        w = L.ones(3, requires_grad=True)
        y = w + x2  # add saves neither input: fine
        y.sum().backward()
        r["grad"] = w.grad.tolist()
        r["save"] = _error(lambda: w * x2)
        r["save_view"] = _error(lambda: w * x2[:])
        z = w * x2.clone()
        z.sum().backward()
        r["grad2"] = w.grad.tolist()
        with L.inference_mode(False):
            r["off"] = L.ones(1).is_inference()
        with L.no_grad():
            r["no_grad"] = L.ones(1).is_inference()
    # torch's messages, with kael's names for torch.no_grad() and torch.inference_mode()
    seen[torch]["save"] = seen[torch]["save"].replace("`torch.", "`kael.")
    seen[torch]["save_view"] = seen[torch]["save_view"].replace("`torch.", "`kael.")
    assert seen[kael] == seen[torch]
    assert seen[torch]["save"].startswith("Inference tensors cannot be saved for backward")


def test_inference_mode_does_not_bump_versions_of_inference_tensors():
    with kael.inference_mode():
        x = kael.zeros(4)
        for _ in range(3):
            x.add_(1)
            x[0] = 5.0
        x[kael.tensor([1, 2])] = kael.tensor([7.0, 8.0])
    assert x.tolist() == [5.0, 7.0, 8.0, 3.0]
    with pytest.raises(RuntimeError, match="Inference tensors do not track version counter"):
        x._version


# ---------------------------------------------------------------- Functions saving their output

def _exp_function(lib):
    class SavesOutput(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            out = x.exp()
            ctx.save_for_backward(out, None, x)
            return out

        @staticmethod
        def backward(ctx, g):
            out, none, x = ctx.saved_tensors
            assert none is None
            return g * out
    return SavesOutput


def test_function_saving_its_output_leaves_no_reference_cycle():
    for lib in (torch, kael):
        fn = _exp_function(lib)
        x = lib.ones(3, requires_grad=True)
        y = fn.apply(x)
        node_ref = weakref.ref(y)
        gc.collect()
        del y
        assert node_ref() is None, lib.__name__  # freed by reference counting alone
        y = fn.apply(x)
        y.sum().backward()
        assert x.grad.tolist() == pytest.approx([np.e] * 3)
        ref = weakref.ref(y)
        del y
        gc.collect()
        assert ref() is None


def test_function_saved_output_has_its_history_for_double_backward():
    t, k = rand(3, seed=22)
    for lib, x in ((torch, t), (kael, k)):
        y = _exp_function(lib).apply(x)
        (g,) = lib.autograd.grad(y.sum(), x, create_graph=True)
        assert g.requires_grad
        g.sum().backward()
    check(k.grad, t.grad)
    y = _exp_function(kael).apply(k)
    y.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.sum().backward()


def test_function_refuses_to_save_an_inference_tensor():
    for lib in (torch, kael):
        class Mul(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, c):
                ctx.save_for_backward(c)
                return x * c

            @staticmethod
            def backward(ctx, g):
                (c,) = ctx.saved_tensors
                return g * c, None
        with lib.inference_mode():
            c = lib.ones(2)
        with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
            Mul.apply(lib.ones(2, requires_grad=True), c)


# ---------------------------------------------------------------- backward(inputs=)

def test_backward_inputs_accumulates_only_into_the_inputs():
    res = {}
    for lib in (torch, kael):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, -1.0], requires_grad=True)
        seen = []
        b.register_hook(lambda g: seen.append("b"))
        a.register_hook(lambda g: seen.append("a"))
        y = a * b
        y.retain_grad()
        h = (y * y).sum()
        h.backward(inputs=[a], retain_graph=True)
        r = {"a": a.grad.tolist(), "b": b.grad, "seen": list(seen)}
        h.backward(inputs=a, retain_graph=True)
        r["a2"] = a.grad.tolist()
        y2 = a * b * 2
        z = (y2 * y2).sum()
        lib.autograd.backward([z], inputs=[y2, b], retain_graph=True)
        r["y2"] = y2.grad.tolist()
        r["b2"] = b.grad.tolist()
        r["a3"] = a.grad.tolist()
        lib.autograd.backward(z, grad_tensors=lib.tensor(2.0), inputs=[b])
        r["b3"] = b.grad.tolist()
        r["y_retained"] = y.grad.tolist()
        r["seen2"] = seen
        r["empty"] = _error(lambda: (a * 2).sum().backward(inputs=[]))
        r["no_grad"] = _error(lambda: (a * 2).sum().backward(inputs=[lib.ones(1)]))
        res[lib] = r
    assert res[kael] == res[torch]


# ---------------------------------------------------------------- views of a base modified in place

def test_views_follow_in_place_writes_to_their_base():
    res = {}
    for L in (torch, kael):
        r = res[L] = []
        a = L.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        # the base written after the view was made
        base = a * 1
        view = base[:2]
        base.mul_(2)
        r.append(view.grad_fn.name())
        view.sum().backward()
        r.append(a.grad.tolist())
        a.grad = None
        # another view written
        base = a * 1
        v1, v2 = base[0], base[:3]
        v1.mul_(3)
        (v2 * L.tensor([1.0, 10.0, 100.0])).sum().backward()
        r.append(a.grad.tolist())
        a.grad = None
        # a view of a view, and a write under no_grad (the history still holds)
        base = (a * a).view(2, 2)
        row = base[1]
        col = row[1:]
        base[0].add_(base[1].exp())
        with L.no_grad():
            base.add_(1)
        (row.sum() * 2 + col.sum() + base.sum()).backward()
        r.append(a.grad.tolist())
        r.append((row.grad_fn.name(), col.grad_fn.name()))
    assert res[kael] == res[torch]


# ---------------------------------------------------------------- gradients taken, not copied
# A leaf's first gradient is the tensor the backward pass produced, taken without a copy where
# nothing else holds it (as PyTorch's AccumulateGrad steals it); one that the caller, a hook or
# another leaf still holds is copied, so no change through .grad reaches it, nor the reverse.


def test_gradient_passed_to_backward_is_copied():
    for lib in (torch, kael):
        x = lib.ones(3, requires_grad=True)
        g = lib.tensor([1.0, 2.0, 3.0])
        x.backward(g)
        x.grad.add_(10)
        assert g.tolist() == [1.0, 2.0, 3.0]
        g.mul_(0)
        assert x.grad.tolist() == [11.0, 12.0, 13.0]


def test_gradient_a_hook_keeps_is_copied():
    for lib in (torch, kael):
        x = lib.ones(4, requires_grad=True)
        seen = []
        x.register_hook(lambda g: seen.append(g))
        (x * 3).sum().backward()
        x.grad.zero_()
        assert seen[0].tolist() == [3.0] * 4
        assert x.grad.tolist() == [0.0] * 4


def test_gradient_shared_by_two_leaves_is_copied_for_one():
    for lib in (torch, kael):
        a = lib.ones(5, requires_grad=True)
        b = lib.ones(5, requires_grad=True)
        (a + b).sum().backward()  # add's backward hands the same gradient to both leaves
        a.grad.add_(1)
        assert a.grad.tolist() == [2.0] * 5
        assert b.grad.tolist() == [1.0] * 5


def test_gradient_view_of_a_held_tensor_is_copied():
    # the gradient a hook returns is a view of a tensor the test holds: its memory is shared.
    # kael copies it; PyTorch takes it (it counts references to the view, not to its memory), so
    # there x.grad and base alias each other (docs/decisions/autograd.md, "Gradients taken, not copied")
    x = kael.ones(2, 3, requires_grad=True)
    base = kael.full((2, 3), 7.0)
    x.register_hook(lambda g: base.view(2, 3))
    (x * 2).sum().backward()
    x.grad.add_(1)
    assert base.tolist() == [[7.0] * 3] * 2
    assert x.grad.tolist() == [[8.0] * 3] * 2


def test_gradient_nothing_else_holds_is_taken():
    # a large gradient (a block of the caching allocator) that nothing else holds is taken: its
    # backward allocates one block fewer than the same backward with a hook that keeps the
    # gradient (which must then be copied)
    from kael import _C

    def blocks_in_backward(x, keep):
        seen = []
        handle = x.register_hook(lambda g: seen.append(g)) if keep else None
        loss = (x * 2).sum()
        before = _C.allocator_stats()
        loss.backward()
        after = _C.allocator_stats()
        if handle is not None:
            handle.remove()
        x.grad = None
        return (after["hits"] + after["misses"]) - (before["hits"] + before["misses"])

    x = kael.randn(512, 1024, requires_grad=True)
    blocks_in_backward(x, False)  # warm-up
    taken, kept = blocks_in_backward(x, False), blocks_in_backward(x, True)
    assert taken == kept - 1, (taken, kept)
    (x * 2).sum().backward()
    check(x.grad, torch.full((512, 1024), 2.0))
