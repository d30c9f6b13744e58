"""Gradients of kael.nn's layers and losses against torch's, training steps of the optimizers on a
real model against torch, gradient clipping, the BCE gradient at 0, and XOR."""
import math

import pytest
import torch

import kael
import kael.nn as nn
import kael.nn.functional as F
import kael.optim as optim
from helpers import check, to_kael
from test_nn_module import copy_weights


def grads_match(make, *inputs, input_grad=True, atol=1e-5, rtol=1e-4, train=False):
    """Runs make(lib) in both libraries with the same weights on inputs, backpropagates
    sum(output * weights) with the same random weights, and compares the output, the gradient of
    every parameter (by name) and of the floating inputs."""
    t = make(torch)
    k = make(kael)
    copy_weights(t, k)
    t.train(train)
    k.train(train)
    tin = [x.clone().requires_grad_(input_grad and x.is_floating_point()) for x in inputs]
    kin = []
    for x in inputs:
        kx = to_kael(x)
        if input_grad and x.is_floating_point():
            kx.requires_grad_(True)
        kin.append(kx)
    tout = t(*tin)
    kout = k(*kin)
    if isinstance(tout, tuple):
        tout, kout = tout[0], kout[0]
    check(kout, tout.detach(), atol=atol, rtol=rtol)
    r = torch.randn(tout.shape)
    (tout * r).sum().backward()
    (kout * to_kael(r)).sum().backward()
    tparams = dict(t.named_parameters())
    for name, kp in k.named_parameters():
        tp = tparams[name]
        if tp.grad is None:
            assert kp.grad is None, name
            continue
        assert kp.grad is not None, name
        check(kp.grad, tp.grad, atol=atol, rtol=rtol)
    for kx, tx in zip(kin, tin):
        if tx.requires_grad:
            check(kx.grad, tx.grad, atol=atol, rtol=rtol)


@pytest.mark.parametrize("bias", [True, False])
def test_linear_grad(bias):
    grads_match(lambda lib: lib.nn.Linear(5, 3, bias=bias), torch.randn(4, 2, 5))


@pytest.mark.parametrize("name,kwargs", [("ReLU", {}), ("GELU", {}), ("GELU", {"approximate": "tanh"}), ("SiLU", {}),
                                         ("Sigmoid", {}), ("Tanh", {}), ("Softmax", {"dim": -1}),
                                         ("LogSoftmax", {"dim": 1}), ("Flatten", {}), ("Identity", {})])
def test_activation_grads(name, kwargs):
    grads_match(lambda lib: getattr(lib.nn, name)(**kwargs), torch.randn(3, 4, 5))


@pytest.mark.parametrize("affine,bias", [(True, True), (True, False), (False, False)])
def test_layer_norm_grad(affine, bias):
    def make(lib):
        layer = lib.nn.LayerNorm((4, 6), elementwise_affine=affine, bias=bias)
        if lib is torch:
            with torch.no_grad():
                for p in layer.parameters():
                    p.uniform_(-1, 1)
        return layer
    grads_match(make, torch.randn(3, 4, 6))


@pytest.mark.parametrize("padding_idx", [None, 1])
def test_embedding_grad(padding_idx):
    grads_match(lambda lib: lib.nn.Embedding(7, 3, padding_idx=padding_idx), torch.tensor([[1, 2, 1], [6, 0, 1]]))


def test_sequential_grad():
    grads_match(lambda lib: lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.GELU(), lib.nn.LayerNorm(8),
                                              lib.nn.Linear(8, 3)), torch.randn(5, 4))


@pytest.mark.parametrize("need_weights", [False, True])
def test_multihead_attention_grad(need_weights):
    class Wrapper:
        pass

    def make(lib):
        mha = lib.nn.MultiheadAttention(8, 2, batch_first=True)

        class Self(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.mha = mha

            def forward(self, x):
                return self.mha(x, x, x, need_weights=need_weights)[0]
        return Self()
    grads_match(make, torch.randn(2, 5, 8))


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer_grad(norm_first):
    def make(lib):
        layer = lib.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu", batch_first=True,
                                               norm_first=norm_first)
        mask = lib.ones(5, 5, dtype=lib.bool).triu(1)

        class Causal(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.layer = layer

            def forward(self, x):
                return self.layer(x, src_mask=mask, is_causal=True)
        return Causal()
    grads_match(make, torch.randn(2, 5, 8), train=True)


def loss_grads(kael_fn, torch_fn, x, *rest):
    tx = x.clone().requires_grad_(True)
    kx = to_kael(x).requires_grad_(True)
    tl = torch_fn(tx, *rest)
    kl = kael_fn(kx, *[to_kael(r) for r in rest])
    check(kl, tl.detach())
    tl.sum().backward()
    kl.sum().backward()
    check(kx.grad, tx.grad)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_loss_grads(reduction):
    x = torch.randn(6, 4)
    y = torch.tensor([0, 3, 1, 2, 2, 1])
    loss_grads(nn.CrossEntropyLoss(reduction=reduction, ignore_index=2, label_smoothing=0.1),
               torch.nn.CrossEntropyLoss(reduction=reduction, ignore_index=2, label_smoothing=0.1), x, y)
    logp = torch.log_softmax(x, 1)
    loss_grads(nn.NLLLoss(reduction=reduction, ignore_index=1), torch.nn.NLLLoss(reduction=reduction, ignore_index=1),
               logp, y)
    target = torch.randn(6, 4)
    loss_grads(nn.MSELoss(reduction=reduction), torch.nn.MSELoss(reduction=reduction), x, target)
    loss_grads(nn.L1Loss(reduction=reduction), torch.nn.L1Loss(reduction=reduction), x, target)
    probs = torch.rand(6, 4)
    loss_grads(nn.BCEWithLogitsLoss(reduction=reduction), torch.nn.BCEWithLogitsLoss(reduction=reduction), x, probs)
    pw = torch.rand(4) * 2
    loss_grads(nn.BCEWithLogitsLoss(reduction=reduction, pos_weight=to_kael(pw)),
               torch.nn.BCEWithLogitsLoss(reduction=reduction, pos_weight=pw), x, probs)


def test_binary_cross_entropy_gradient_at_zero_is_sigmoid_minus_target():
    targets = [0.0, 0.25, 1.0]
    x = kael.zeros(3).requires_grad_(True)
    loss = F.binary_cross_entropy_with_logits(x, kael.tensor(targets), reduction="sum")
    loss.backward()
    assert x.grad.tolist() == [0.5 - t for t in targets]
    tx = torch.zeros(3, requires_grad=True)
    torch.nn.functional.binary_cross_entropy_with_logits(tx, torch.tensor(targets), reduction="sum").backward()
    assert tx.grad.tolist() == x.grad.tolist()


# ------------------------------------------------------------------ clipping


def with_grads(values):
    params = []
    for v in values:
        p = nn.Parameter(kael.zeros(len(v)))
        p.grad = kael.tensor(v)
        params.append(p)
    return params


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf, 3.0])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    values = [[3.0, -4.0], [1.0, 2.0, -2.0]]
    kp = with_grads(values)
    tp = [torch.nn.Parameter(torch.zeros(len(v))) for v in values]
    for p, v in zip(tp, values):
        p.grad = torch.tensor(v)
    ktotal = nn.utils.clip_grad_norm_(kp, max_norm, norm_type)
    ttotal = torch.nn.utils.clip_grad_norm_(tp, max_norm, norm_type)
    check(ktotal, ttotal)
    for k, t in zip(kp, tp):
        check(k.grad, t.grad)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
@pytest.mark.parametrize("dtypes", [("float64", "float64"), ("float16", "float16"), ("float32", "float64")])
def test_clip_grad_norm_keeps_the_gradients_dtype(norm_type, dtypes):
    # the total norm has the dtype torch gives it (the per-gradient norms stacked with promotion),
    # not float32 whatever the gradients are
    values = [[3.0, -4.0], [1.0, 2.0, -2.0]]
    kp, tp = [], []
    for v, d in zip(values, dtypes):
        k = nn.Parameter(kael.zeros(len(v), dtype=getattr(kael, d)))
        k.grad = kael.tensor(v, dtype=getattr(kael, d))
        t = torch.nn.Parameter(torch.zeros(len(v), dtype=getattr(torch, d)))
        t.grad = torch.tensor(v, dtype=getattr(torch, d))
        kp.append(k)
        tp.append(t)
    ktotal = nn.utils.clip_grad_norm_(kp, 1.5, norm_type)
    ttotal = torch.nn.utils.clip_grad_norm_(tp, 1.5, norm_type)
    check(ktotal, ttotal)
    for k, t in zip(kp, tp):
        check(k.grad, t.grad)


def test_clip_grad_norm_non_finite_raises_before_touching_gradients():
    for bad in (math.inf, math.nan):
        params = with_grads([[1.0, bad], [2.0]])
        with pytest.raises(RuntimeError, match="clip_grad_norm_: .*non-finite"):
            nn.utils.clip_grad_norm_(params, 1.0, error_if_nonfinite=True)
        assert params[1].grad.tolist() == [2.0]
        tparams = [torch.tensor(v, requires_grad=True) for v in ([1.0, bad], [2.0])]
        for t in tparams:
            t.grad = t.detach().clone()
        with pytest.raises(RuntimeError, match="non-finite"):
            torch.nn.utils.clip_grad_norm_(tparams, 1.0, error_if_nonfinite=True)
    # torch's default (False) scales by the non-finite norm
    params = with_grads([[1.0, math.inf], [2.0]])
    tparams = [torch.tensor(v, requires_grad=True) for v in ([1.0, math.inf], [2.0])]
    for t in tparams:
        t.grad = t.detach().clone()
    total = nn.utils.clip_grad_norm_(params, 1.0)
    ttotal = torch.nn.utils.clip_grad_norm_(tparams, 1.0)
    assert math.isinf(total.item()) and math.isinf(ttotal.item())
    for k, t in zip(params, tparams):
        assert str(k.grad.tolist()) == str(t.grad.tolist())


def test_clip_grad_value_matches_torch():
    values = [[3.0, -4.0, 0.2], [1.0]]
    kp = with_grads(values)
    tp = [torch.nn.Parameter(torch.zeros(len(v))) for v in values]
    for p, v in zip(tp, values):
        p.grad = torch.tensor(v)
    nn.utils.clip_grad_value_(kp, 0.5)
    torch.nn.utils.clip_grad_value_(tp, 0.5)
    for k, t in zip(kp, tp):
        check(k.grad, t.grad)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf, 3.0])
def test_total_norm_then_clip_with_it_matches_torch(norm_type):
    values = [[3.0, -4.0], [1.0, 2.0, -2.0], [0.5]]
    kp = with_grads(values)
    tp = [torch.nn.Parameter(torch.zeros(len(v))) for v in values]
    for p, v in zip(tp, values):
        p.grad = torch.tensor(v)
    ktotal = nn.utils.get_total_norm([p.grad for p in kp], norm_type)
    ttotal = torch.nn.utils.get_total_norm([p.grad for p in tp], norm_type)
    check(ktotal, ttotal)
    check(nn.utils.get_total_norm(kp[0].grad, norm_type), torch.nn.utils.get_total_norm(tp[0].grad, norm_type))
    assert nn.utils.clip_grads_with_norm_(kp, 2.0, ktotal) is None
    torch.nn.utils.clip_grads_with_norm_(tp, 2.0, ttotal)
    for k, t in zip(kp, tp):
        check(k.grad, t.grad)
    # a single tensor for the parameters; kael also takes a plain number for the norm (torch's
    # clamp of a float raises TypeError)
    nn.utils.clip_grads_with_norm_(kp[1], 0.5, 10.0)
    torch.nn.utils.clip_grads_with_norm_(tp[1], 0.5, torch.tensor(10.0))
    check(kp[1].grad, tp[1].grad)
    check(nn.utils.get_total_norm([]), torch.nn.utils.get_total_norm([]))
    with pytest.raises(RuntimeError, match="get_total_norm: the total norm of order 2.0 .* is non-finite"):
        nn.utils.get_total_norm([kael.tensor([1.0, math.nan])], error_if_nonfinite=True)
    assert math.isnan(nn.utils.get_total_norm([kael.tensor([1.0, math.nan])]).item())


def test_clip_grad_norm_takes_a_generator_and_the_deprecated_name_warns():
    values = [[3.0, -4.0], [1.0, 2.0, -2.0]]
    kp = with_grads(values)
    tp = [torch.nn.Parameter(torch.zeros(len(v))) for v in values]
    for p, v in zip(tp, values):
        p.grad = torch.tensor(v)
    check(nn.utils.clip_grad_norm_((p for p in kp), 1.0), torch.nn.utils.clip_grad_norm_((p for p in tp), 1.0))
    for k, t in zip(kp, tp):
        check(k.grad, t.grad)  # scaled: the generator was walked for the norm and again for the scaling
    with pytest.warns(FutureWarning, match="deprecated"):
        ktotal = nn.utils.clip_grad_norm(kp, 0.5)
    with pytest.warns(FutureWarning, match="deprecated"):
        ttotal = torch.nn.utils.clip_grad_norm(tp, 0.5)
    check(ktotal, ttotal)


def test_parameters_to_vector_and_back_match_torch():
    kl, tl = nn.Linear(3, 2), torch.nn.Linear(3, 2)
    with torch.no_grad():
        tl.weight.copy_(torch.tensor(kl.weight.tolist()))
        tl.bias.copy_(torch.tensor(kl.bias.tolist()))
    kv, tv = nn.utils.parameters_to_vector(kl.parameters()), torch.nn.utils.parameters_to_vector(tl.parameters())
    check(kv, tv)
    assert kv.requires_grad == tv.requires_grad  # cat of parameters: part of the graph
    kv.sum().backward()
    tv.sum().backward()
    check(kl.weight.grad, tl.weight.grad)
    new_k, new_t = kael.arange(8.0) * 0.5, torch.arange(8.0) * 0.5
    nn.utils.vector_to_parameters(new_k, kl.parameters())
    torch.nn.utils.vector_to_parameters(new_t, tl.parameters())
    check(kl.weight, tl.weight)
    check(kl.bias, tl.bias)
    assert isinstance(kl.weight, nn.Parameter) and kl.weight.requires_grad
    new_k[0] = 100.0  # the parameters view the vector, as in torch
    new_t[0] = 100.0
    check(kl.weight, tl.weight)
    for lib, layer in ((kael, kl), (torch, tl)):
        with pytest.raises(TypeError, match="but got: list"):
            lib.nn.utils.vector_to_parameters([1.0] * 8, layer.parameters())
    # a vector too short for the last parameter: kael raises before replacing any (torch has
    # replaced the weight by then)
    before = [p.tolist() for p in kl.parameters()]
    with pytest.raises((RuntimeError, ValueError)):
        nn.utils.vector_to_parameters(kael.zeros(7), kl.parameters())
    assert [p.tolist() for p in kl.parameters()] == before


# ------------------------------------------------------------------ training against torch


class MLP:
    @staticmethod
    def make(lib):
        return lib.nn.Sequential(lib.nn.Linear(4, 16), lib.nn.Tanh(), lib.nn.LayerNorm(16), lib.nn.Linear(16, 3))


@pytest.mark.parametrize("name,kwargs", [
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ("Adam", {"lr": 0.01}),
    ("AdamW", {"lr": 0.01, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.5}),
])
def test_training_steps_match_torch(name, kwargs):
    t = MLP.make(torch)
    k = MLP.make(kael)
    copy_weights(t, k)
    topt = getattr(torch.optim, name)(t.parameters(), **kwargs)
    kopt = getattr(optim, name)(k.parameters(), **kwargs)
    x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
    kx, ky = to_kael(x), to_kael(y)
    for _ in range(5):
        tl = torch.nn.functional.cross_entropy(t(x), y)
        kl = F.cross_entropy(k(kx), ky)
        check(kl, tl.detach(), atol=1e-5, rtol=1e-4)
        topt.zero_grad()
        kopt.zero_grad()
        tl.backward()
        kl.backward()
        topt.step()
        kopt.step()
    tparams = dict(t.named_parameters())
    for n, p in k.named_parameters():
        check(p, tparams[n].detach(), atol=1e-5, rtol=1e-4)


def test_stale_graph_after_step_fails_loudly():
    layer = nn.Linear(2, 1)
    opt = optim.SGD(layer.parameters(), lr=0.1)
    x = kael.randn(3, 2)
    loss = (layer(x) ** 2).sum()
    loss.backward(retain_graph=True)
    opt.step()
    with pytest.raises(RuntimeError, match="modified by an inplace operation|version"):
        loss.backward()


def test_training_xor():
    kael.manual_seed(0)
    x = kael.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    y = kael.tensor([[0.0], [1.0], [1.0], [0.0]])
    model = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = optim.Adam(model.parameters(), lr=0.05)
    loss_fn = nn.BCEWithLogitsLoss()
    for _ in range(300):
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.01
    predictions = (model(x) > 0).tolist()
    assert predictions == [[False], [True], [True], [False]]
