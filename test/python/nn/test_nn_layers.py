"""kael.nn layers and losses against torch.nn: same weights (copied across), same inputs, same outputs."""
import math

import pytest
import torch

import kael
import kael.nn as nn
import kael.nn.functional as F
from helpers import check, to_kael
from test_nn_module import copy_weights


def run_both(make, *inputs, train=False, atol=None, rtol=None):
    """Builds the layer with make(lib) in torch and kael, copies torch's weights into kael's, runs
    both on the inputs (torch tensors, converted) and compares every tensor output."""
    t = make(torch)
    k = make(kael)
    copy_weights(t, k)
    t.train(train)
    k.train(train)
    tout = t(*inputs)
    kout = k(*[to_kael(x) for x in inputs])
    if isinstance(tout, tuple):
        assert isinstance(kout, tuple) and len(kout) == len(tout)
        for ko, to in zip(kout, tout):
            if to is None:
                assert ko is None
            else:
                check(ko, to, atol=atol, rtol=rtol)
    else:
        check(kout, tout, atol=atol, rtol=rtol)
    return k, t


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 3), (3,)])
def test_linear(bias, shape):
    run_both(lambda lib: lib.nn.Linear(3, 6, bias=bias), torch.randn(shape))


def test_linear_float64():
    run_both(lambda lib: lib.nn.Linear(4, 2, dtype=lib.float64), torch.randn(3, 4, dtype=torch.float64))


def test_linear_parameter_shapes_and_names_match_torch():
    k, t = kael.nn.Linear(7, 5), torch.nn.Linear(7, 5)
    assert [(n, tuple(p.shape)) for n, p in k.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in t.named_parameters()]
    assert all(type(p) is nn.Parameter for p in k.parameters())


@pytest.mark.parametrize("name,kwargs", [("ReLU", {}), ("GELU", {}), ("GELU", {"approximate": "tanh"}), ("SiLU", {}),
                                         ("Sigmoid", {}), ("Tanh", {}), ("Softmax", {"dim": 1}),
                                         ("Softmax", {"dim": -1}), ("LogSoftmax", {"dim": 1}), ("Identity", {}),
                                         ("Flatten", {}), ("Flatten", {"start_dim": 0, "end_dim": 1})])
def test_activation_and_shape_layers(name, kwargs):
    run_both(lambda lib: getattr(lib.nn, name)(**kwargs), torch.randn(2, 3, 4))


def test_relu_inplace_returns_input():
    x = kael.tensor([-1.0, 2.0])
    out = nn.ReLU(inplace=True)(x)
    assert out is x and x.tolist() == [0.0, 2.0]


def test_softmax_without_dim_warns_like_torch():
    with pytest.warns(UserWarning, match="Implicit dimension"):
        nn.Softmax()(kael.randn(2, 3))


@pytest.mark.parametrize("shape,normalized", [((4, 6), 6), ((2, 3, 4), (3, 4))])
@pytest.mark.parametrize("affine,bias", [(True, True), (True, False), (False, True)])
def test_layer_norm(shape, normalized, affine, bias):
    def make(lib):
        layer = lib.nn.LayerNorm(normalized, eps=1e-4, elementwise_affine=affine, bias=bias)
        return layer
    t = make(torch)
    with torch.no_grad():
        for p in t.parameters():
            p.uniform_(-1, 1)  # not the ones/zeros they start with
    k = make(kael)
    copy_weights(t, k)
    x = torch.randn(shape)
    check(k(to_kael(x)), t(x))
    assert [n for n, _ in k.named_parameters()] == [n for n, _ in t.named_parameters()]


def test_layer_norm_initialisation():
    layer = nn.LayerNorm(5)
    assert layer.weight.tolist() == [1.0] * 5 and layer.bias.tolist() == [0.0] * 5


@pytest.mark.parametrize("padding_idx", [None, 0, -1])
def test_embedding(padding_idx):
    k, t = run_both(lambda lib: lib.nn.Embedding(10, 4, padding_idx=padding_idx),
                    torch.tensor([[1, 2, 9], [0, 0, 5]]))
    if padding_idx is not None:
        fresh = nn.Embedding(10, 4, padding_idx=padding_idx)
        assert fresh.weight[padding_idx % 10].tolist() == [0.0] * 4
        assert fresh.padding_idx == padding_idx % 10


def test_embedding_from_pretrained_and_errors():
    weight = kael.randn(5, 3)
    e = nn.Embedding.from_pretrained(weight)
    assert e.weight.data_ptr() == weight.data_ptr() and e.weight.requires_grad is False
    for lib in (torch, kael):
        with pytest.raises(AssertionError, match="Padding_idx"):
            lib.nn.Embedding(5, 3, padding_idx=5)
    with pytest.raises(IndexError):
        nn.Embedding(5, 3)(kael.tensor([5]))


def test_dropout_training_scales_and_zeroes():
    kael.manual_seed(0)
    x = kael.ones(10000)
    out = nn.Dropout(0.25)(x)
    values = set(out.tolist())
    assert values <= {0.0, kael.tensor(1 / 0.75).item()}  # 1 / (1 - p) in float32
    zero_fraction = out.tolist().count(0.0) / 10000
    assert abs(zero_fraction - 0.25) < 0.02
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


def test_sequential_modulelist_moduledict():
    run_both(lambda lib: lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.ReLU(), lib.nn.Linear(8, 2)),
             torch.randn(3, 4))
    s = nn.Sequential(nn.Linear(1, 1), nn.ReLU(), nn.Tanh())
    assert len(s) == 3 and isinstance(s[-1], nn.Tanh) and isinstance(s[1:], nn.Sequential) and len(s[1:]) == 2
    with pytest.raises(IndexError):
        s[3]
    ml = nn.ModuleList([nn.ReLU()])
    ml.append(nn.Tanh()).extend([nn.Sigmoid()])
    ml.insert(0, nn.Identity())
    assert [type(m).__name__ for m in ml] == ["Identity", "ReLU", "Tanh", "Sigmoid"]
    del ml[1]
    assert [n for n, _ in ml.named_children()] == ["0", "1", "2"]
    md = nn.ModuleDict({"a": nn.Linear(2, 2)})
    md["b"] = nn.Linear(2, 3)
    assert list(md.keys()) == ["a", "b"] and "b" in md and len(md) == 2
    assert [n for n, _ in md.named_parameters()] == ["a.weight", "a.bias", "b.weight", "b.bias"]
    del md["a"]
    assert list(md) == ["b"]


@pytest.mark.parametrize("kind", ["Sequential", "ModuleList"])
@pytest.mark.parametrize("key", [0, 2, -1, -4, slice(1, 3), slice(None, None, 2), slice(5, 9)])
def test_container_delitem_renumbers_as_torch(kind, key):
    """del container[key] removes the same children as torch and renames the rest "0", "1", ..."""
    names = ["Identity", "ReLU", "Tanh", "Sigmoid", "GELU"]

    def build(lib):
        modules = [getattr(lib.nn, n)() for n in names]
        return getattr(lib.nn, kind)(*modules) if kind == "Sequential" else lib.nn.ModuleList(modules)

    t, k = build(torch), build(kael)
    del t[key]
    del k[key]
    assert [(n, type(m).__name__) for n, m in k.named_children()] == \
        [(n, type(m).__name__) for n, m in t.named_children()]


def test_container_delitem_out_of_range():
    for lib in (torch, kael):
        for c in (lib.nn.Sequential(lib.nn.ReLU()), lib.nn.ModuleList([lib.nn.ReLU()])):
            with pytest.raises(IndexError):
                del c[1]


# ------------------------------------------------------------------ attention


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_self(batch_first, need_weights):
    def make(lib):
        return lib.nn.MultiheadAttention(8, 2, batch_first=batch_first)
    t, k = make(torch), make(kael)
    copy_weights(t, k)
    x = torch.randn(3, 5, 8)
    tout, tw = t(x, x, x, need_weights=need_weights)
    kx = to_kael(x)
    kout, kw = k(kx, kx, kx, need_weights=need_weights)
    check(kout, tout, atol=1e-5, rtol=1e-5)
    if need_weights:
        check(kw, tw)
    else:
        assert kw is None and tw is None


@pytest.mark.parametrize("mask_kind", ["bool", "float", "causal", "padding", "3d"])
def test_multihead_attention_masks(mask_kind):
    t = torch.nn.MultiheadAttention(8, 4, batch_first=True)
    k = kael.nn.MultiheadAttention(8, 4, batch_first=True)
    copy_weights(t, k)
    q, kv = torch.randn(2, 5, 8), torch.randn(2, 6, 8)
    kwargs = {}
    if mask_kind == "bool":
        kwargs["attn_mask"] = torch.rand(5, 6) > 0.6
        kwargs["attn_mask"][:, 0] = False
    elif mask_kind == "float":
        kwargs["attn_mask"] = torch.randn(5, 6)
    elif mask_kind == "3d":
        kwargs["attn_mask"] = torch.randn(8, 5, 6)
    elif mask_kind == "padding":
        kwargs["key_padding_mask"] = torch.tensor([[False] * 5 + [True], [False] * 3 + [True] * 3])
    if mask_kind == "causal":
        q = kv = torch.randn(2, 5, 8)
        mask = torch.ones(5, 5, dtype=torch.bool).triu(1)
        tout = t(q, q, q, attn_mask=mask, is_causal=True, need_weights=False)[0]
        kq = to_kael(q)
        kout = k(kq, kq, kq, attn_mask=to_kael(mask), is_causal=True, need_weights=False)[0]
        check(kout, tout, atol=1e-5, rtol=1e-5)
        return
    tout, tw = t(q, kv, kv, **kwargs)
    kk = {name: to_kael(v) for name, v in kwargs.items()}
    kout, kw = k(to_kael(q), to_kael(kv), to_kael(kv), **kk)
    check(kout, tout, atol=1e-5, rtol=1e-5)
    check(kw, tw)
    kout2, _ = k(to_kael(q), to_kael(kv), to_kael(kv), need_weights=False, **kk)
    check(kout2, tout, atol=1e-5, rtol=1e-5)


def test_multihead_attention_unbatched_and_errors():
    t = torch.nn.MultiheadAttention(6, 3)
    k = kael.nn.MultiheadAttention(6, 3)
    copy_weights(t, k)
    x = torch.randn(4, 6)
    check(k(to_kael(x), to_kael(x), to_kael(x))[0], t(x, x, x)[0], atol=1e-5, rtol=1e-5)
    with pytest.raises(AssertionError):
        kael.nn.MultiheadAttention(6, 4)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        k(to_kael(x), to_kael(x), to_kael(x), is_causal=True)


def test_multihead_attention_initialisation():
    m = nn.MultiheadAttention(16, 4)
    assert m.in_proj_bias.tolist() == [0.0] * 48 and m.out_proj.bias.tolist() == [0.0] * 16
    bound = math.sqrt(6 / (16 + 48))
    assert max(abs(v) for row in m.in_proj_weight.tolist() for v in row) <= bound
    assert [n for n, _ in m.named_parameters()] == \
        [n for n, _ in torch.nn.MultiheadAttention(16, 4).named_parameters()]


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("batch_first", [True, False])
def test_transformer_encoder_layer(norm_first, activation, batch_first):
    def make(lib):
        return lib.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation=activation,
                                              batch_first=batch_first, norm_first=norm_first)
    t, k = make(torch), make(kael)
    copy_weights(t, k)
    assert list(k.state_dict()) == list(t.state_dict())
    x = torch.randn(3, 5, 8)
    for training in (True, False):
        t.train(training)
        k.train(training)
        check(k(to_kael(x)), t(x), atol=1e-5, rtol=1e-5)
    mask = torch.ones(5, 5, dtype=torch.bool).triu(1)
    t.train()
    k.train()
    check(k(to_kael(x), src_mask=to_kael(mask), is_causal=True), t(x, src_mask=mask, is_causal=True),
          atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------ losses


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore_index,label_smoothing", [(-100, 0.0), (2, 0.0), (-100, 0.2), (1, 0.1)])
def test_cross_entropy_loss(reduction, ignore_index, label_smoothing):
    x = torch.randn(6, 4)
    y = torch.tensor([0, 1, 2, 3, 2, 1])
    t = torch.nn.CrossEntropyLoss(ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing)
    k = nn.CrossEntropyLoss(ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing)
    check(k(to_kael(x), to_kael(y)), t(x, y))


def test_cross_entropy_loss_spatial_and_probabilities():
    x = torch.randn(2, 3, 4)
    y = torch.randint(0, 3, (2, 4))
    check(nn.CrossEntropyLoss()(to_kael(x), to_kael(y)), torch.nn.CrossEntropyLoss()(x, y))
    p = torch.softmax(torch.randn(5, 3), 1)
    x = torch.randn(5, 3)
    check(nn.CrossEntropyLoss()(to_kael(x), to_kael(p)), torch.nn.CrossEntropyLoss()(x, p))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore_index", [-100, 1])
def test_nll_loss(reduction, ignore_index):
    x = torch.log_softmax(torch.randn(5, 3), 1)
    y = torch.tensor([0, 1, 2, 1, 0])
    t = torch.nn.NLLLoss(ignore_index=ignore_index, reduction=reduction)
    k = nn.NLLLoss(ignore_index=ignore_index, reduction=reduction)
    check(k(to_kael(x), to_kael(y)), t(x, y))
    x3 = torch.randn(2, 3, 4)
    y3 = torch.randint(0, 3, (2, 4))
    check(k(to_kael(x3), to_kael(y3)), t(x3, y3))
    x1 = torch.randn(3)
    y1 = torch.tensor(2)
    check(k(to_kael(x1), to_kael(y1)), t(x1, y1))


def test_nll_loss_target_out_of_range():
    with pytest.raises(IndexError, match="out of bounds"):
        nn.NLLLoss()(kael.randn(2, 3), kael.tensor([0, 3]))
    with pytest.raises(IndexError, match="out of bounds"):
        torch.nn.NLLLoss()(torch.randn(2, 3), torch.tensor([0, 3]))


@pytest.mark.parametrize("cls", ["MSELoss", "L1Loss"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses(cls, reduction):
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    check(getattr(nn, cls)(reduction=reduction)(to_kael(x), to_kael(y)),
          getattr(torch.nn, cls)(reduction=reduction)(x, y))


def test_regression_loss_broadcast_warning_and_bad_reduction():
    with pytest.warns(UserWarning, match="target size"):
        nn.MSELoss()(kael.randn(3, 1), kael.randn(3))
    for lib in (torch, kael):
        with pytest.raises(ValueError, match="is not a valid value for reduction"):
            lib.nn.functional.mse_loss(lib.randn(3), lib.randn(3), reduction="avg")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_bce_with_logits(reduction, weighted):
    x = torch.randn(4, 5) * 4
    x[0, 0] = 0.0
    y = torch.rand(4, 5)
    kwargs_t, kwargs_k = {}, {}
    if weighted:
        w, pw = torch.rand(4, 5), torch.rand(5) * 3
        kwargs_t = {"weight": w, "pos_weight": pw}
        kwargs_k = {"weight": to_kael(w), "pos_weight": to_kael(pw)}
    t = torch.nn.BCEWithLogitsLoss(reduction=reduction, **kwargs_t)
    k = nn.BCEWithLogitsLoss(reduction=reduction, **kwargs_k)
    check(k(to_kael(x), to_kael(y)), t(x, y))


def test_bce_with_logits_is_stable_for_large_logits():
    x = torch.tensor([-200.0, -30.0, 0.0, 30.0, 200.0])
    y = torch.tensor([1.0, 0.0, 0.5, 1.0, 0.0])
    check(F.binary_cross_entropy_with_logits(to_kael(x), to_kael(y), reduction="none"),
          torch.nn.functional.binary_cross_entropy_with_logits(x, y, reduction="none"))
    with pytest.raises(ValueError, match="must be the same as input size"):
        F.binary_cross_entropy_with_logits(kael.randn(3), kael.randn(2))
