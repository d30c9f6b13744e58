"""nn.TransformerEncoder(Layer), nn.TransformerDecoder(Layer) and nn.Transformer against torch.nn:
torch's state_dict loaded into kael's module, the same inputs and masks, outputs and gradients
(of the inputs and of every parameter) compared, in train mode with dropout 0 and in eval mode."""
import pytest
import torch

import kael
from helpers import check, to_kael

D, HEADS, FF = 16, 4, 24
S, T, N = 6, 5, 3  # source length, target length, batch


def tol(dtype):
    return dict(atol=2e-5, rtol=2e-4) if dtype == torch.float32 else dict(atol=1e-10, rtol=1e-9)


def load_into(kmod, tmod):
    """kael module with torch's weights, through load_state_dict: the keys must be torch's."""
    sd = tmod.state_dict()
    assert list(kmod.state_dict()) == list(sd)
    result = kmod.load_state_dict({name: to_kael(value) for name, value in sd.items()})
    assert not result.missing_keys and not result.unexpected_keys
    return kmod


def kdtype(dtype):
    return kael.float32 if dtype == torch.float32 else kael.float64


def pair(make, dtype, training):
    t = make(torch).to(dtype)
    k = make(kael).to(kdtype(dtype))
    load_into(k, t)
    t.train(training)
    k.train(training)
    return t, k


def leaf(x):
    return x.detach().clone().requires_grad_(True), to_kael(x).requires_grad_(True)


def compare_run(t, k, t_args, k_args, t_kwargs, k_kwargs, t_leaves, k_leaves, dtype):
    tout = t(*t_args, **t_kwargs)
    kout = k(*k_args, **k_kwargs)
    check(kout, tout, **tol(dtype))
    g = torch.randn(tout.shape, dtype=dtype)
    tout.backward(g)
    kout.backward(to_kael(g))
    for kl, tl in zip(k_leaves, t_leaves):
        check(kl.grad, tl.grad, **tol(dtype))
    tparams = dict(t.named_parameters())
    for name, kp in k.named_parameters():
        check(kp.grad, tparams[name].grad, **tol(dtype))


def causal_bool(n):
    return torch.ones(n, n, dtype=torch.bool).triu(1)


def padding(n, length):
    """(n, length) bool key padding: True at the last positions of some batch elements, never a whole row."""
    pad = torch.zeros(n, length, dtype=torch.bool)
    pad[0, -2:] = True
    pad[-1, -1] = True
    return pad


ENCODER_MASKS = ["none", "bool_causal", "float_causal", "float_random", "padding", "padding_and_causal",
                 "causal_hint", "float_padding"]


def encoder_masks(kind, dtype):
    """(mask, src_key_padding_mask, is_causal) for the encoder's forward."""
    if kind == "none":
        return None, None, None
    if kind == "bool_causal":
        return causal_bool(S), None, None
    if kind == "float_causal":
        return torch.nn.Transformer.generate_square_subsequent_mask(S, dtype=dtype), None, None
    if kind == "float_random":
        return torch.randn(S, S, dtype=dtype), None, None
    if kind == "padding":
        return None, padding(N, S), None
    if kind == "padding_and_causal":
        return causal_bool(S), padding(N, S), None
    if kind == "causal_hint":
        return causal_bool(S), None, True
    if kind == "float_padding":
        return None, padding(N, S).to(dtype) * -1e4, None
    raise AssertionError(kind)


def to_k(x):
    return None if x is None else to_kael(x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("mask_kind", ENCODER_MASKS)
@pytest.mark.parametrize("training", [True, False])
def test_encoder(dtype, norm_first, batch_first, mask_kind, training):
    def make(lib):
        layer = lib.nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, batch_first=batch_first,
                                               norm_first=norm_first)
        return lib.nn.TransformerEncoder(layer, 2, norm=lib.nn.LayerNorm(D), enable_nested_tensor=False)
    t, k = pair(make, dtype, training)
    x = torch.randn((N, S, D) if batch_first else (S, N, D), dtype=dtype)
    tx, kx = leaf(x)
    mask, pad, is_causal = encoder_masks(mask_kind, dtype)
    compare_run(t, k, (tx,), (kx,),
                dict(mask=mask, src_key_padding_mask=pad, is_causal=is_causal),
                dict(mask=to_k(mask), src_key_padding_mask=to_k(pad), is_causal=is_causal),
                [tx], [kx], dtype)


@pytest.mark.parametrize("activation", ["relu", "gelu", "callable", "module"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_activation_and_bias(activation, bias, norm_first):
    def make(lib):
        act = {"callable": lib.nn.functional.silu,
               "module": lib.nn.GELU(approximate="tanh")}.get(activation, activation)
        return lib.nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, activation=act, bias=bias,
                                              norm_first=norm_first, batch_first=True)
    t, k = pair(make, torch.float64, True)
    assert k.activation_relu_or_gelu == t.activation_relu_or_gelu
    x = torch.randn(N, S, D, dtype=torch.float64)
    tx, kx = leaf(x)
    pad = padding(N, S)
    compare_run(t, k, (tx,), (kx,), dict(src_mask=causal_bool(S), src_key_padding_mask=pad),
                dict(src_mask=to_kael(causal_bool(S)), src_key_padding_mask=to_kael(pad)), [tx], [kx], torch.float64)


def test_encoder_unbatched():
    def make(lib):
        return lib.nn.TransformerEncoder(lib.nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0), 2)
    t, k = pair(make, torch.float64, False)
    x = torch.randn(S, D, dtype=torch.float64)
    tx, kx = leaf(x)
    compare_run(t, k, (tx,), (kx,), dict(mask=causal_bool(S)), dict(mask=to_kael(causal_bool(S))), [tx], [kx],
                torch.float64)


def test_encoder_eval_nested_fast_path():
    """torch in eval mode without autograd, batch_first and a key padding mask runs its layers on a
    nested tensor and writes 0 at the padded positions; kael computes those positions as torch's
    slow path does. The positions that are not padded agree."""
    def make(lib):
        layer = lib.nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, batch_first=True)
        return lib.nn.TransformerEncoder(layer, 2)
    t, k = pair(make, torch.float32, False)
    x = torch.randn(N, S, D)
    pad = padding(N, S)
    with torch.no_grad():
        tout = t(x, src_key_padding_mask=pad)
    with kael.no_grad():
        kout = k(to_kael(x), src_key_padding_mask=to_kael(pad))
    assert bool((tout[pad] == 0).all())
    keep = ~pad
    check(kout[to_kael(keep)], tout[keep], atol=1e-4, rtol=1e-4)
    # the slow path (autograd on) is the one kael matches everywhere
    check(kout, t(x, src_key_padding_mask=pad).detach(), **tol(torch.float32))


def test_encoder_clones_are_deep_copies():
    layer = kael.nn.TransformerEncoderLayer(D, HEADS, FF)
    enc = kael.nn.TransformerEncoder(layer, 3)
    assert len(enc.layers) == 3 and enc.num_layers == 3
    w = [m.linear1.weight for m in enc.layers]
    assert all(bool((wi == layer.linear1.weight).all()) for wi in w)
    assert len({wi.data_ptr() for wi in w} | {layer.linear1.weight.data_ptr()}) == 4
    with kael.no_grad():
        enc.layers[0].linear1.weight.add_(1.0)
    assert bool((enc.layers[1].linear1.weight == layer.linear1.weight).all())
    assert enc.enable_nested_tensor is True and enc.mask_check is True


DECODER_MASKS = ["none", "causal_float", "causal_bool", "causal_hint", "memory_mask", "paddings", "all",
                 "memory_causal"]


def decoder_masks(kind, dtype):
    """kwargs of the decoder's forward (torch tensors)."""
    if kind == "none":
        return {}
    if kind == "causal_float":
        return dict(tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=dtype))
    if kind == "causal_bool":
        return dict(tgt_mask=causal_bool(T))
    if kind == "causal_hint":
        return dict(tgt_mask=causal_bool(T), tgt_is_causal=True)
    if kind == "memory_mask":
        return dict(memory_mask=torch.randn(T, S, dtype=dtype))
    if kind == "paddings":
        return dict(tgt_key_padding_mask=padding(N, T), memory_key_padding_mask=padding(N, S))
    if kind == "all":
        return dict(tgt_mask=causal_bool(T), memory_mask=torch.rand(T, S) > 0.8,
                    tgt_key_padding_mask=padding(N, T), memory_key_padding_mask=padding(N, S))
    if kind == "memory_causal":
        # a square memory mask with the causal hint: torch attends causally over the memory
        return dict(memory_mask=causal_bool(S)[:T], memory_is_causal=True)
    raise AssertionError(kind)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("mask_kind", DECODER_MASKS)
@pytest.mark.parametrize("training", [True, False])
def test_decoder(dtype, norm_first, batch_first, mask_kind, training):
    def make(lib):
        layer = lib.nn.TransformerDecoderLayer(D, HEADS, FF, dropout=0.0, batch_first=batch_first,
                                               norm_first=norm_first)
        return lib.nn.TransformerDecoder(layer, 2, norm=lib.nn.LayerNorm(D))
    t, k = pair(make, dtype, training)
    shape = (lambda length: (N, length, D)) if batch_first else (lambda length: (length, N, D))
    ttgt, ktgt = leaf(torch.randn(shape(T), dtype=dtype))
    tmem, kmem = leaf(torch.randn(shape(S), dtype=dtype))
    masks = decoder_masks(mask_kind, dtype)
    kmasks = {name: to_k(v) if isinstance(v, torch.Tensor) else v for name, v in masks.items()}
    compare_run(t, k, (ttgt, tmem), (ktgt, kmem), masks, kmasks, [ttgt, tmem], [ktgt, kmem], dtype)


@pytest.mark.parametrize("activation", ["relu", "gelu", "callable"])
@pytest.mark.parametrize("bias", [True, False])
def test_decoder_layer_activation_and_bias(activation, bias):
    def make(lib):
        act = lib.nn.functional.tanh if activation == "callable" else activation
        return lib.nn.TransformerDecoderLayer(D, HEADS, FF, dropout=0.0, activation=act, bias=bias, batch_first=True)
    t, k = pair(make, torch.float64, True)
    ttgt, ktgt = leaf(torch.randn(N, T, D, dtype=torch.float64))
    tmem, kmem = leaf(torch.randn(N, S, D, dtype=torch.float64))
    compare_run(t, k, (ttgt, tmem), (ktgt, kmem), dict(tgt_mask=causal_bool(T)), dict(tgt_mask=to_kael(causal_bool(T))),
                [ttgt, tmem], [ktgt, kmem], torch.float64)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("norm_first,batch_first", [(False, False), (True, True), (False, True)])
@pytest.mark.parametrize("training", [True, False])
def test_transformer(dtype, norm_first, batch_first, training):
    def make(lib):
        return lib.nn.Transformer(D, HEADS, num_encoder_layers=2, num_decoder_layers=3, dim_feedforward=FF,
                                  dropout=0.0, norm_first=norm_first, batch_first=batch_first, activation="gelu")
    t, k = pair(make, dtype, training)
    shape = (lambda length: (N, length, D)) if batch_first else (lambda length: (length, N, D))
    tsrc, ksrc = leaf(torch.randn(shape(S), dtype=dtype))
    ttgt, ktgt = leaf(torch.randn(shape(T), dtype=dtype))
    tgt_mask = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=dtype)
    masks = dict(tgt_mask=tgt_mask, src_key_padding_mask=padding(N, S), memory_key_padding_mask=padding(N, S),
                 tgt_key_padding_mask=padding(N, T))
    kmasks = {name: to_kael(v) for name, v in masks.items()}
    compare_run(t, k, (tsrc, ttgt), (ksrc, ktgt), masks, kmasks, [tsrc, ttgt], [ksrc, ktgt], dtype)


def test_transformer_unbatched_and_custom_parts():
    def make(lib):
        enc = lib.nn.TransformerEncoder(lib.nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0), 1)
        dec = lib.nn.TransformerDecoder(lib.nn.TransformerDecoderLayer(D, HEADS, FF, dropout=0.0), 2)
        return lib.nn.Transformer(D, HEADS, dim_feedforward=FF, custom_encoder=enc, custom_decoder=dec, dropout=0.0)
    t, k = pair(make, torch.float64, True)
    assert k.encoder.norm is None and k.decoder.norm is None
    tsrc, ksrc = leaf(torch.randn(S, D, dtype=torch.float64))
    ttgt, ktgt = leaf(torch.randn(T, D, dtype=torch.float64))
    mask = causal_bool(T)
    compare_run(t, k, (tsrc, ttgt), (ksrc, ktgt), dict(tgt_mask=mask, tgt_is_causal=True),
                dict(tgt_mask=to_kael(mask), tgt_is_causal=True), [tsrc, ttgt], [ksrc, ktgt], torch.float64)


def test_generate_square_subsequent_mask():
    for n in (0, 1, 4):
        check(kael.nn.Transformer.generate_square_subsequent_mask(n),
              torch.nn.Transformer.generate_square_subsequent_mask(n))
    check(kael.nn.Transformer.generate_square_subsequent_mask(3, dtype=kael.float64),
          torch.nn.Transformer.generate_square_subsequent_mask(3, dtype=torch.float64))


def test_transformer_init_is_xavier_uniform():
    """Every parameter with more than one dimension is drawn by xavier_uniform_ (bound
    sqrt(6 / (fan_in + fan_out)), variance bound^2 / 3); the 1-d ones keep their modules' init."""
    d, ff = 64, 256
    k = kael.nn.Transformer(d, 4, 1, 1, dim_feedforward=ff)
    t = torch.nn.Transformer(d, 4, 1, 1, dim_feedforward=ff)
    assert list(k.state_dict()) == list(t.state_dict())
    tparams = dict(t.named_parameters())
    for name, p in k.named_parameters():
        assert tuple(p.shape) == tuple(tparams[name].shape), name
        if p.dim() > 1:
            fan_out, fan_in = p.shape
            bound = (6.0 / (fan_in + fan_out)) ** 0.5
            assert float(p.abs().max()) <= bound, name
            var = float((p.double() ** 2).mean())
            assert abs(var - bound ** 2 / 3) < 0.15 * bound ** 2 / 3, (name, var)
    enc = k.encoder.layers[0]
    assert float(enc.self_attn.in_proj_bias.abs().max()) == 0.0
    assert float(enc.linear1.bias.abs().max()) > 0.0  # Linear's own init, untouched
    assert float(enc.linear1.bias.abs().max()) <= 1.0 / d ** 0.5
    check(k.encoder.norm.weight, tparams["encoder.norm.weight"].detach())


def test_transformer_errors():
    k = kael.nn.Transformer(D, HEADS, 1, 1, dim_feedforward=FF)
    t = torch.nn.Transformer(D, HEADS, 1, 1, dim_feedforward=FF)
    for src, tgt in [((S, N, D), (T, N + 1, D)), ((S, N, D + 1), (T, N, D)), ((S, N, D), (T, N, D - 1))]:
        with pytest.raises(RuntimeError) as te:
            t(torch.randn(src), torch.randn(tgt))
        with pytest.raises(RuntimeError) as ke:
            k(kael.randn(*src), kael.randn(*tgt))
        assert str(ke.value).startswith(str(te.value).split(",")[0])
    for lib in (torch, kael):
        with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
            lib.nn.TransformerDecoderLayer(D, HEADS, activation="tanh")
        with pytest.raises(RuntimeError, match="activation should be relu/gelu, not silu"):
            lib.nn.TransformerEncoderLayer(D, HEADS, activation="silu")
