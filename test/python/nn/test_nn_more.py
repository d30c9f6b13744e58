"""The activations, normalisations, padding, distances and losses of kael.nn written over
registered ops, against torch: values, gradients, errors, module reprs and running statistics."""
import warnings

import numpy as np
import pytest
import torch
import torch.nn as tnn
import torch.nn.functional as TF

import kael
import kael.nn as knn
import kael.nn.functional as KF

RNG = np.random.default_rng(11)
X = RNG.standard_normal((4, 6)) * 3
X[0, :3] = [0.0, -0.5, 0.5]  # the kinks


def pair(a, requires_grad=True):
    t = torch.tensor(a, requires_grad=requires_grad)
    k = kael.tensor(a, requires_grad=requires_grad)
    return t, k


def compare(fn_t, fn_k, *arrays, rtol=1e-10, atol=1e-12, grad=True):
    ts, ks = zip(*(pair(a, grad and a.dtype.kind == "f") for a in arrays))
    rt, rk = fn_t(*ts), fn_k(*ks)
    assert tuple(rk.shape) == tuple(rt.shape)
    assert str(rk.dtype).split(".")[1] == str(rt.dtype).split(".")[1]
    np.testing.assert_allclose(rk.detach().numpy(), rt.detach().numpy(), rtol=rtol, atol=atol)
    if grad and rt.requires_grad:
        g = np.linspace(-1, 1, rt.numel()).reshape(tuple(rt.shape))
        rt.backward(torch.tensor(g))
        rk.backward(kael.tensor(g))
        for t, k in zip(ts, ks):
            if t.requires_grad:
                np.testing.assert_allclose(k.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol)


ACTIVATIONS = [
    ("leaky_relu", {}), ("leaky_relu", {"negative_slope": 0.2}), ("elu", {}), ("elu", {"alpha": 0.5}),
    ("selu", {}), ("celu", {"alpha": 2.0}), ("hardtanh", {}), ("hardtanh", {"min_val": -2.0, "max_val": 0.5}),
    ("relu6", {}), ("hardsigmoid", {}), ("hardswish", {}), ("mish", {}), ("logsigmoid", {}), ("softsign", {}),
    ("tanhshrink", {}), ("softshrink", {}), ("softshrink", {"lambd": 1.0}), ("hardshrink", {}),
    ("threshold", {"threshold": 0.1, "value": 20.0}), ("glu", {}), ("glu", {"dim": 0}), ("softmin", {"dim": 1}),
]


@pytest.mark.parametrize("name,kw", ACTIVATIONS, ids=[f"{n}-{kw}" for n, kw in ACTIVATIONS])
def test_activation_functions(name, kw):
    if name in ("hardsigmoid", "hardswish"):
        # torch's float64 backward of these multiplies by a float constant (1/6 rounded to
        # float32): compared in float32, where that constant is exact to the dtype
        compare(lambda x: getattr(TF, name)(x, **kw), lambda x: getattr(KF, name)(x, **kw), X.astype(np.float32),
                rtol=1e-6, atol=1e-7)
        return
    compare(lambda x: getattr(TF, name)(x, **kw), lambda x: getattr(KF, name)(x, **kw), X)


@pytest.mark.parametrize("name,kw", [("leaky_relu", {}), ("elu", {}), ("selu", {}), ("hardtanh", {}),
                                     ("relu6", {}), ("hardswish", {}), ("threshold", {"threshold": 0.0, "value": 1.0})])
def test_in_place_activations(name, kw):
    for lib, F in ((torch, TF), (kael, KF)):
        x = lib.tensor(X)
        r = getattr(F, name)(x, inplace=True, **kw)
        assert r is x
    t, k = torch.tensor(X), kael.tensor(X)
    getattr(TF, name)(t, inplace=True, **kw)
    getattr(KF, name)(k, inplace=True, **kw)
    np.testing.assert_allclose(k.numpy(), t.numpy(), rtol=1e-12)


@pytest.mark.parametrize("shape_w", [(4, 6, 1), (6,)], ids=["one", "per-channel"])
def test_prelu(shape_w):
    w = np.array([0.25]) if shape_w == (4, 6, 1) else np.linspace(0.1, 0.6, 6)
    compare(lambda x, w: TF.prelu(x, w), lambda x, w: KF.prelu(x, w), X.reshape(4, 6, 1)[:, :, :], w)
    m_t, m_k = tnn.PReLU(6), knn.PReLU(6)
    assert repr(m_k) == repr(m_t)
    x32 = X.astype(np.float32)
    np.testing.assert_allclose(m_k(kael.tensor(x32)).detach().numpy(), m_t(torch.tensor(x32)).detach().numpy())


def test_rrelu_eval_and_training():
    compare(lambda x: TF.rrelu(x), lambda x: KF.rrelu(x), X)
    y = KF.rrelu(kael.tensor(X), training=True).numpy()
    neg = X < 0
    slopes = y[neg] / X[neg]
    assert (slopes >= 1 / 8 - 1e-12).all() and (slopes <= 1 / 3 + 1e-12).all()
    assert (y[~neg] == X[~neg]).all()


def test_errors_as_torch():
    for F, lib in ((TF, torch), (KF, kael)):
        with pytest.raises(RuntimeError):
            F.glu(lib.ones(3))
        with pytest.raises(ValueError):
            F.hardtanh(lib.ones(3), 2.0, 1.0)
        with pytest.raises(RuntimeError):
            F.prelu(lib.ones(2, 3), lib.ones(2))


# ---- normalisation

@pytest.mark.parametrize("shape,normalized", [((4, 6), (6,)), ((2, 3, 4), (3, 4)), ((5,), (5,))], ids=str)
@pytest.mark.parametrize("weight", [False, True])
@pytest.mark.parametrize("eps", [None, 1e-3])
def test_rms_norm(shape, normalized, weight, eps):
    x = RNG.standard_normal(shape)
    ns = normalized
    if weight:
        w = RNG.standard_normal(ns)
        compare(lambda x, w: TF.rms_norm(x, normalized, w, eps), lambda x, w: KF.rms_norm(x, normalized, w, eps), x, w)
    else:
        compare(lambda x: TF.rms_norm(x, normalized, None, eps), lambda x: KF.rms_norm(x, normalized, None, eps), x)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_rms_norm_dtypes(dtype):
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    t = TF.rms_norm(torch.tensor(x).to(getattr(torch, dtype)), (8,), torch.ones(8, dtype=getattr(torch, dtype)))
    k = KF.rms_norm(kael.tensor(x).to(getattr(kael, dtype)), (8,), kael.ones(8, dtype=getattr(kael, dtype)))
    assert k.dtype == getattr(kael, dtype)
    np.testing.assert_allclose(k.float().numpy(), t.float().numpy(), rtol=1e-6)
    m_t, m_k = tnn.RMSNorm(8), knn.RMSNorm(8)
    assert repr(m_k) == repr(m_t)
    with pytest.raises(RuntimeError):
        KF.rms_norm(kael.ones(3, 4), (5,))


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (3.0, -1)])
def test_normalize_and_distances(p, dim):
    x2 = RNG.standard_normal((4, 6))
    compare(lambda x: TF.normalize(x, p, dim), lambda x: KF.normalize(x, p, dim), X)
    compare(lambda a, b: TF.cosine_similarity(a, b, dim), lambda a, b: KF.cosine_similarity(a, b, dim), X, x2)
    compare(lambda a, b: TF.pairwise_distance(a, b, p), lambda a, b: KF.pairwise_distance(a, b, p), X, x2)
    z = np.zeros((2, 6))
    compare(lambda x: TF.normalize(x), lambda x: KF.normalize(x), z, grad=False)


@pytest.mark.parametrize("groups", [1, 2, 3, 6])
def test_group_norm(groups):
    x = RNG.standard_normal((2, 6, 5))
    w, b = RNG.standard_normal(6), RNG.standard_normal(6)
    compare(lambda x, w, b: TF.group_norm(x, groups, w, b), lambda x, w, b: KF.group_norm(x, groups, w, b), x, w, b)
    m_t, m_k = tnn.GroupNorm(groups, 6), knn.GroupNorm(groups, 6)
    assert repr(m_k) == repr(m_t)
    with pytest.raises(RuntimeError):
        KF.group_norm(kael.ones(2, 5), 2)


@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (8, 3)), ("BatchNorm1d", (8, 3, 5)),
                                       ("BatchNorm2d", (4, 3, 2, 5)), ("BatchNorm3d", (2, 3, 2, 2, 2))], ids=str)
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batch_norm_modules(cls, shape, momentum):
    m_t, m_k = getattr(tnn, cls)(3, momentum=momentum).double(), getattr(knn, cls)(3, momentum=momentum)
    m_k = m_k.to(kael.float64) if hasattr(m_k, "to") else m_k
    assert repr(m_k) == repr(m_t)
    for step in range(3):
        x = RNG.standard_normal(shape) * (step + 1) + step
        tx, kx = torch.tensor(x, requires_grad=True), kael.tensor(x, requires_grad=True)
        yt, yk = m_t(tx), m_k(kx)
        np.testing.assert_allclose(yk.detach().numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-12)
        yt.sum().backward() if step == 0 else None
        if step == 0:
            (yk * 1).sum().backward()
        np.testing.assert_allclose(m_k.running_mean.numpy(), m_t.running_mean.numpy(), rtol=1e-12)
        np.testing.assert_allclose(m_k.running_var.numpy(), m_t.running_var.numpy(), rtol=1e-12)
        assert m_k.num_batches_tracked.item() == m_t.num_batches_tracked.item()
    m_t.eval()
    m_k.eval()
    x = RNG.standard_normal(shape)
    np.testing.assert_allclose(m_k(kael.tensor(x)).detach().numpy(), m_t(torch.tensor(x)).detach().numpy(),
                               rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError):
        m_k(kael.ones(*([2] * (7 - len(shape)))))


def test_batch_norm_gradients():
    x, w, b = RNG.standard_normal((6, 3, 4)), RNG.standard_normal(3), RNG.standard_normal(3)
    compare(lambda x, w, b: TF.batch_norm(x, None, None, w, b, training=True),
            lambda x, w, b: KF.batch_norm(x, None, None, w, b, training=True), x, w, b)
    rm, rv = RNG.standard_normal(3), RNG.random(3) + 0.5
    compare(lambda x, w, b: TF.batch_norm(x, torch.tensor(rm), torch.tensor(rv), w, b),
            lambda x, w, b: KF.batch_norm(x, kael.tensor(rm), kael.tensor(rv), w, b), x, w, b)


# ---- padding

PADS = [
    ("constant", (1, 2), None), ("constant", (1, 0, 2, 1), 3.5), ("constant", (-1, 2), None),
    ("constant", (0, 0, -1, -1, 1, 1), 0.0), ("reflect", (2, 1), None), ("reflect", (1, 2, 2, 1), None),
    ("replicate", (3, 1), None), ("replicate", (1, 2, 0, 3), None), ("circular", (2, 1), None),
    ("circular", (1, 1, 2, 0), None),
]


@pytest.mark.parametrize("mode,pad,value", PADS, ids=[f"{m}-{p}" for m, p, _ in PADS])
def test_pad(mode, pad, value):
    x = RNG.standard_normal((2, 3, 4))
    kw = {} if value is None else {"value": value}
    compare(lambda x: TF.pad(x, pad, mode, **kw), lambda x: KF.pad(x, pad, mode, **kw), x)


def test_pad_errors_and_modules():
    for F, lib in ((TF, torch), (KF, kael)):
        with pytest.raises(RuntimeError):
            F.pad(lib.ones(2, 3), (1,))
        with pytest.raises(RuntimeError):
            F.pad(lib.ones(1, 2, 3), (3, 0), "reflect")
    x = RNG.standard_normal((1, 2, 3, 4))
    for name, args in [("ConstantPad1d", (2, 1.5)), ("ConstantPad2d", ((1, 0, 2, 1), -1.0)), ("ZeroPad2d", (1,)),
                       ("ReflectionPad1d", ((2, 1),)), ("ReflectionPad2d", (1,)), ("ReplicationPad1d", (3,)),
                       ("ReplicationPad2d", ((1, 2, 0, 1),)), ("CircularPad1d", (1,)), ("ZeroPad1d", ((0, 2),))]:
        m_t, m_k = getattr(tnn, name)(*args), getattr(knn, name)(*args)
        assert repr(m_k) == repr(m_t), name
        xi = x[0] if name.endswith("1d") else x  # non-constant 1-d padding takes 2-d or 3-d input
        np.testing.assert_allclose(m_k(kael.tensor(xi)).numpy(), m_t(torch.tensor(xi)).numpy())
    for F, lib in ((TF, torch), (KF, kael)):
        with pytest.raises(NotImplementedError, match="Padding size 2 is not supported for 4D"):
            F.pad(lib.ones(1, 2, 3, 4), (1, 1), "reflect")


# ---- losses

LOSSES = [
    ("huber_loss", {}), ("huber_loss", {"delta": 0.3, "reduction": "sum"}), ("smooth_l1_loss", {}),
    ("smooth_l1_loss", {"beta": 0.5, "reduction": "none"}), ("smooth_l1_loss", {"beta": 0.0}),
    ("soft_margin_loss", {}),
]


@pytest.mark.parametrize("name,kw", LOSSES, ids=[f"{n}-{kw}" for n, kw in LOSSES])
def test_losses(name, kw):
    target = RNG.standard_normal((4, 6)) if name != "soft_margin_loss" else np.sign(RNG.standard_normal((4, 6)))
    # the target as a constant (torch's soft_margin_loss refuses a target that requires grad)
    compare(lambda x: getattr(TF, name)(x, torch.tensor(target), **kw),
            lambda x: getattr(KF, name)(x, kael.tensor(target), **kw), X)


@pytest.mark.parametrize("reduction", ["batchmean", "sum", "none", "mean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    inp = np.log(RNG.dirichlet(np.ones(5), size=3))
    tgt = RNG.dirichlet(np.ones(5), size=3)
    tgt[0, 0] = 0.0
    tgt = np.log(tgt + 1e-3) if log_target else tgt
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare(lambda x, t: TF.kl_div(x, t, reduction=reduction, log_target=log_target),
                lambda x, t: KF.kl_div(x, t, reduction=reduction, log_target=log_target), inp, tgt)
    if reduction == "mean":
        with pytest.warns(UserWarning, match="batchmean"):
            KF.kl_div(kael.tensor(inp), kael.tensor(tgt))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(reduction, weighted):
    p = RNG.random((4, 3))
    p[0, 0], p[0, 1] = 0.0, 1.0  # the clamped logs
    t = (RNG.random((4, 3)) > 0.5).astype(np.float64)
    w = RNG.random((4, 3))
    if weighted:
        compare(lambda x, y: TF.binary_cross_entropy(x, y, torch.tensor(w), reduction=reduction),
                lambda x, y: KF.binary_cross_entropy(x, y, kael.tensor(w), reduction=reduction), p, t, grad=False)
    else:
        compare(lambda x, y: TF.binary_cross_entropy(x, y, reduction=reduction),
                lambda x, y: KF.binary_cross_entropy(x, y, reduction=reduction), p, t, grad=False)
    q = np.clip(p, 0.05, 0.95)
    compare(lambda x, y: TF.binary_cross_entropy(x, y, reduction=reduction),
            lambda x, y: KF.binary_cross_entropy(x, y, reduction=reduction), q, t)
    for F, lib in ((TF, torch), (KF, kael)):
        with pytest.raises(RuntimeError):
            F.binary_cross_entropy(lib.tensor([1.5]), lib.tensor([1.0]))


def test_margin_ranking_loss_and_modules():
    a, b = RNG.standard_normal(5), RNG.standard_normal(5)
    y = np.sign(RNG.standard_normal(5))
    compare(lambda a, b, y: TF.margin_ranking_loss(a, b, y, margin=0.3),
            lambda a, b, y: KF.margin_ranking_loss(a, b, y, margin=0.3), a, b, y)
    for name, args in [("HuberLoss", ()), ("SmoothL1Loss", ()), ("KLDivLoss", ()), ("BCELoss", ()),
                       ("SoftMarginLoss", ()), ("MarginRankingLoss", ())]:
        assert repr(getattr(knn, name)(*args)) == repr(getattr(tnn, name)(*args))


@pytest.mark.parametrize("name,args", [
    ("LeakyReLU", ()), ("LeakyReLU", (0.2, True)), ("ELU", ()), ("CELU", (0.5,)), ("SELU", ()), ("Hardtanh", ()),
    ("ReLU6", ()), ("Hardsigmoid", ()), ("Hardswish", ()), ("Mish", ()), ("LogSigmoid", ()), ("Softsign", ()),
    ("Tanhshrink", ()), ("Softshrink", ()), ("Hardshrink", (0.3,)), ("Threshold", (0.1, 20.0)), ("GLU", ()),
    ("Softmin", (1,)), ("Softplus", (2.0,)), ("RReLU", ()), ("Unflatten", (1, (2, 3))),
    ("CosineSimilarity", ()), ("PairwiseDistance", ()),
], ids=lambda v: str(v))
def test_modules(name, args):
    m_t, m_k = getattr(tnn, name)(*args), getattr(knn, name)(*args)
    assert repr(m_k) == repr(m_t)
    m_t.eval()
    m_k.eval()
    if name in ("CosineSimilarity", "PairwiseDistance"):
        x2 = RNG.standard_normal((4, 6))
        np.testing.assert_allclose(m_k(kael.tensor(X), kael.tensor(x2)).numpy(),
                                   m_t(torch.tensor(X), torch.tensor(x2)).numpy(), rtol=1e-10)
        return
    x = X.copy()
    np.testing.assert_allclose(m_k(kael.tensor(x)).detach().numpy(), m_t(torch.tensor(x)).detach().numpy(),
                               rtol=1e-10, atol=1e-12)
