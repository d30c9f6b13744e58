"""Convolutions against torch: conv1d, conv2d, conv_transpose1d, conv_transpose2d (values, input,
weight and bias gradients, dtypes, layouts, exception classes and messages) and the nn layers
(parameters, initialisation, printout, state dicts, padding modes)."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import kael
import kael.nn as nn
import kael.nn.functional as F
from helpers import check, to_kael

# (input shape, weight shape, kwargs): plain convolutions, 2-d
CONV2D = [
    ((2, 4, 9, 8), (6, 4, 3, 3), dict(stride=1, padding=1)),
    ((2, 4, 9, 8), (6, 2, 3, 3), dict(stride=2, padding=1, groups=2)),
    ((1, 3, 11, 7), (5, 3, 3, 2), dict(stride=(2, 3), padding=(2, 0), dilation=(2, 1))),
    ((3, 8, 7, 7), (8, 1, 3, 3), dict(padding=1, groups=8)),  # depthwise
    ((2, 16, 5, 6), (32, 16, 1, 1), dict()),  # 1x1
    ((1, 1, 28, 28), (6, 1, 5, 5), dict(padding=2)),  # LeNet's first layer
    ((2, 6, 13, 13), (4, 3, 4, 4), dict(stride=3, groups=2, dilation=2)),
    ((1, 5, 1, 9), (5, 5, 1, 3), dict(padding=(0, 4), dilation=(1, 3))),
    ((4, 2, 6, 5), (3, 2, 6, 5), dict()),  # kernel as large as the input
    ((2, 3, 8, 8), (4, 3, 3, 3), dict(stride=4, padding=2)),  # stride past the kernel
]
CONV1D = [
    ((2, 4, 11), (6, 4, 3), dict(stride=2, padding=1)),
    ((1, 6, 20), (6, 2, 5), dict(padding=3, dilation=2, groups=3)),
    ((3, 2, 7), (4, 2, 1), dict()),
    ((2, 3, 9), (3, 1, 4), dict(stride=3, groups=3)),
]
# (input shape, weight shape (C_in, C_out / groups, k...), kwargs)
CONV_T2D = [
    ((2, 4, 5, 6), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((1, 6, 4, 4), (6, 2, 3, 2), dict(stride=(2, 1), padding=(0, 1), groups=3)),
    ((2, 4, 3, 5), (4, 2, 3, 3), dict(dilation=2, output_padding=1, groups=2)),  # output_padding past the stride
    ((1, 3, 6, 6), (3, 5, 1, 1), dict()),
    ((2, 2, 4, 3), (2, 3, 4, 4), dict(stride=3, padding=2, output_padding=(2, 1), dilation=(1, 2))),
]
CONV_T1D = [
    ((2, 4, 7), (4, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((1, 6, 5), (6, 1, 4), dict(stride=3, groups=6, dilation=2)),
]

TOL = {torch.float32: dict(atol=1e-4, rtol=1e-4), torch.float64: dict(atol=1e-10, rtol=1e-10)}


def layout(t, kind):
    """kael's copy of torch t, strided as `kind` says."""
    if kind == "contig":
        return to_kael(t)
    if kind == "channels_last":
        perm = (0,) + tuple(range(2, t.dim())) + (1,)
        back = [0, t.dim() - 1] + list(range(1, t.dim() - 1))
        return to_kael(t.permute(*perm).contiguous()).permute(*back)
    if kind == "sliced":  # every other element of the last dim of a wider tensor
        wide = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
        wide[..., ::2] = t
        k = to_kael(wide)[..., ::2]
        assert not k.is_contiguous()
        return k
    if kind == "transposed":  # batch and channel swapped in memory
        k = to_kael(t.transpose(0, 1).contiguous()).transpose(0, 1)
        return k
    raise AssertionError(kind)


def compare(kfn, tfn, x, w, b, dtype=torch.float64, kind="contig", **kw):
    """Runs both with the same values; compares the result and the gradients of input, weight and
    bias for a random upstream gradient."""
    torch.manual_seed(1)
    x, w = x.to(dtype), w.to(dtype)
    b = b.to(dtype) if b is not None else None
    tx, tw = x.clone().requires_grad_(), w.clone().requires_grad_()
    tb = b.clone().requires_grad_() if b is not None else None
    kx, kw_ = layout(x, kind).requires_grad_(), to_kael(w).requires_grad_()
    kb = to_kael(b).requires_grad_() if b is not None else None
    tout = tfn(tx, tw, tb, **kw)
    kout = kfn(kx, kw_, kb, **kw)
    tol = TOL[dtype]
    check(kout, tout.detach(), **tol)
    g = torch.randn(tout.shape, dtype=dtype)
    tout.backward(g)
    kout.backward(to_kael(g))
    check(kx.grad, tx.grad, **tol)
    check(kw_.grad, tw.grad, **tol)
    if b is not None:
        check(kb.grad, tb.grad, **tol)


def _rand(shape):
    return torch.randn(shape, dtype=torch.float64)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", range(len(CONV2D)))
def test_conv2d(case, bias, dtype):
    xs, ws, kw = CONV2D[case]
    compare(F.conv2d, TF.conv2d, _rand(xs), _rand(ws), _rand(ws[0]) if bias else None, dtype, **kw)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", range(len(CONV1D)))
def test_conv1d(case, dtype):
    xs, ws, kw = CONV1D[case]
    compare(F.conv1d, TF.conv1d, _rand(xs), _rand(ws), _rand(ws[0]), dtype, **kw)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", range(len(CONV_T2D)))
def test_conv_transpose2d(case, bias, dtype):
    xs, ws, kw = CONV_T2D[case]
    out_channels = ws[1] * kw.get("groups", 1)
    compare(F.conv_transpose2d, TF.conv_transpose2d, _rand(xs), _rand(ws), _rand(out_channels) if bias else None,
            dtype, **kw)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", range(len(CONV_T1D)))
def test_conv_transpose1d(case, dtype):
    xs, ws, kw = CONV_T1D[case]
    compare(F.conv_transpose1d, TF.conv_transpose1d, _rand(xs), _rand(ws), _rand(ws[1] * kw.get("groups", 1)),
            dtype, **kw)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind", ["channels_last", "sliced", "transposed"])
def test_layouts(kind, dtype):
    compare(F.conv2d, TF.conv2d, _rand((2, 8, 7, 6)), _rand((16, 8, 3, 3)), _rand(16), dtype, kind, padding=1)
    compare(F.conv2d, TF.conv2d, _rand((2, 8, 7, 6)), _rand((8, 2, 3, 3)), None, dtype, kind, stride=2, groups=4)
    compare(F.conv_transpose2d, TF.conv_transpose2d, _rand((2, 8, 5, 4)), _rand((8, 4, 3, 3)), _rand(4), dtype, kind,
            stride=2, padding=1, output_padding=1)
    if kind != "channels_last":
        compare(F.conv1d, TF.conv1d, _rand((2, 4, 9)), _rand((6, 4, 3)), _rand(6), dtype, kind, padding=1)


def test_noncontiguous_weight():
    x, w = _rand((2, 4, 6, 6)), _rand((3, 4, 3, 2))
    tout = TF.conv2d(x, w.permute(2, 3, 1, 0).contiguous().permute(3, 2, 0, 1))
    kw = to_kael(w.permute(2, 3, 1, 0).contiguous()).permute(3, 2, 0, 1)
    assert not kw.is_contiguous()
    check(F.conv2d(to_kael(x), kw), tout, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("ks,dilation", [((3, 3), 1), ((4, 3), 1), ((2, 5), 1), ((4, 4), 2), ((3, 2), (1, 3))])
def test_padding_same_valid(ks, dilation, dtype):
    for padding in ("same", "valid"):
        compare(F.conv2d, TF.conv2d, _rand((2, 3, 9, 10)), _rand((4, 3) + ks), _rand(4), dtype, padding=padding,
                dilation=dilation)
    for k in (2, 3, 4):
        for padding in ("same", "valid"):
            compare(F.conv1d, TF.conv1d, _rand((2, 3, 9)), _rand((4, 3, k)), None, dtype, padding=padding,
                    dilation=dilation if isinstance(dilation, int) else 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_unbatched(dtype):
    compare(lambda x, w, b, **kw: F.conv2d(x, w, b, **kw), TF.conv2d, _rand((3, 7, 6)), _rand((4, 3, 3, 3)),
            _rand(4), dtype, padding=1)
    compare(F.conv1d, TF.conv1d, _rand((3, 7)), _rand((4, 3, 2)), None, dtype, stride=2)
    compare(F.conv_transpose2d, TF.conv_transpose2d, _rand((3, 4, 5)), _rand((3, 2, 3, 3)), _rand(2), dtype, stride=2)
    compare(F.conv_transpose1d, TF.conv_transpose1d, _rand((3, 4)), _rand((3, 2, 3)), None, dtype)
    compare(F.conv2d, TF.conv2d, _rand((3, 7, 6)), _rand((4, 3, 2, 2)), None, dtype, padding="same")


def test_top_level_functions():
    x, w, b = _rand((2, 3, 6, 6)), _rand((4, 3, 3, 3)), _rand(4)
    check(kael.conv2d(to_kael(x), to_kael(w), to_kael(b), 1, 1), torch.conv2d(x, w, b, 1, 1))
    check(kael.conv2d(to_kael(x), to_kael(w), padding="same"), torch.conv2d(x, w, padding="same"))
    check(kael.conv_transpose2d(to_kael(x), to_kael(w.transpose(0, 1).contiguous()), stride=2),
          torch.conv_transpose2d(x, w.transpose(0, 1), stride=2))
    x1, w1 = _rand((2, 3, 8)), _rand((4, 3, 3))
    check(kael.conv1d(to_kael(x1), to_kael(w1), dilation=2), torch.conv1d(x1, w1, dilation=2))
    check(kael.conv_transpose1d(to_kael(x1), to_kael(w1.transpose(0, 1).contiguous()), padding=1),
          torch.conv_transpose1d(x1, w1.transpose(0, 1), padding=1))
    tout = torch.convolution(x, w, b, [2, 2], [1, 1], [1, 1], False, [0, 0], 1)
    check(kael.convolution(to_kael(x), to_kael(w), to_kael(b), [2, 2], [1, 1], [1, 1], False, [0, 0], 1), tout)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_dtypes(dtype):
    """Against torch in the same dtype: each computes in float32 and rounds once (bias and
    gradient sums may round differently: a tolerance of a few units in the last place)."""
    torch.manual_seed(0)
    tol = dict(atol=2e-2, rtol=2e-2)
    for tfn, kfn, xs, ws, kw in [(TF.conv2d, F.conv2d, (2, 8, 6, 6), (16, 8, 3, 3), dict(padding=1)),
                                 (TF.conv2d, F.conv2d, (2, 8, 6, 6), (8, 2, 3, 3), dict(groups=4, stride=2)),
                                 (TF.conv_transpose2d, F.conv_transpose2d, (2, 8, 4, 4), (8, 4, 3, 3),
                                  dict(stride=2)),
                                 (TF.conv1d, F.conv1d, (2, 8, 9), (4, 8, 3), dict(padding=1))]:
        x, w = torch.randn(xs).to(dtype), (torch.randn(ws) * 0.2).to(dtype)
        tx, tw = x.clone().requires_grad_(), w.clone().requires_grad_()
        kx, kw_ = to_kael(x).requires_grad_(), to_kael(w).requires_grad_()
        tout, kout = tfn(tx, tw, **kw), kfn(kx, kw_, **kw)
        check(kout, tout.detach(), **tol)
        g = torch.randn(tout.shape).to(dtype)
        tout.backward(g)
        kout.backward(to_kael(g))
        check(kx.grad, tx.grad, **tol)
        check(kw_.grad, tw.grad, atol=0.1, rtol=2e-2)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
def test_integer_dtypes(dtype):
    x = torch.randint(0, 4, (2, 3, 6, 5)).to(dtype)
    w = torch.randint(0, 3, (4, 3, 3, 2)).to(dtype)
    b = torch.randint(0, 5, (4,)).to(dtype)
    check(F.conv2d(to_kael(x), to_kael(w), to_kael(b), padding=1, stride=(1, 2)),
          TF.conv2d(x, w, b, padding=1, stride=(1, 2)))
    check(F.conv1d(to_kael(x[:, :, 0]), to_kael(w[:, :, 0])), TF.conv1d(x[:, :, 0], w[:, :, 0]))
    wt = w.transpose(0, 1).contiguous()
    if dtype == torch.int64:  # torch's transposed convolution takes int64 alone of the integer dtypes
        check(F.conv_transpose2d(to_kael(x), to_kael(wt), None, 2), TF.conv_transpose2d(x, wt, None, 2))
    else:
        with pytest.raises(RuntimeError):
            TF.conv_transpose2d(x, wt)
        with pytest.raises(RuntimeError, match="conv_transpose2d: not implemented for dtype"):
            F.conv_transpose2d(to_kael(x), to_kael(wt))


def test_bool_raises():
    x, w = torch.ones(1, 2, 3, 3, dtype=torch.bool), torch.ones(1, 2, 2, 2, dtype=torch.bool)
    with pytest.raises(RuntimeError):
        TF.conv2d(x, w)
    with pytest.raises(RuntimeError, match="conv2d: not implemented for dtype bool"):
        F.conv2d(to_kael(x), to_kael(w))


def _messages(call):
    """(torch's exception, kael's exception) of call(lib, F)."""
    out = []
    for lib, fn in ((torch, TF), (kael, F)):
        with pytest.raises(Exception) as info:
            call(lib, fn)
        out.append(info.value)
    return out


ERRORS = [
    # (name, call(lib, F), op, the start of torch's message kael's message carries after the op name)
    ("channels", lambda L, F: F.conv2d(L.ones(2, 4, 8, 8), L.ones(4, 3, 3, 3)), "conv2d",
     "Given groups=1, weight of size [4, 3, 3, 3], expected input[2, 4, 8, 8] to have 3 channels, but got 4"),
    ("groups channels", lambda L, F: F.conv2d(L.ones(2, 3, 8, 8), L.ones(4, 3, 3, 3), groups=2), "conv2d",
     "Given groups=2, weight of size [4, 3, 3, 3], expected input[2, 3, 8, 8] to have 6 channels"),
    ("groups divide", lambda L, F: F.conv_transpose2d(L.ones(2, 3, 8, 8), L.ones(3, 2, 3, 3), groups=2),
     "conv_transpose2d", "Given groups=2, expected weight to be divisible by 2 at dimension 0"),
    ("kernel too large", lambda L, F: F.conv2d(L.ones(2, 3, 8, 8), L.ones(4, 3, 9, 9)), "conv2d",
     "Calculated padded input size per channel: (8 x 8). Kernel size: (9 x 9). Kernel size can't be greater"),
    ("kernel too large 1d", lambda L, F: F.conv1d(L.ones(2, 3, 1), L.ones(4, 3, 3)), "conv1d",
     "Calculated padded input size per channel: (1). Kernel size: (3)."),
    ("rank 2", lambda L, F: F.conv2d(L.ones(8, 8), L.ones(4, 3, 3, 3)), "conv2d",
     "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [8, 8]"),
    ("rank 6", lambda L, F: F.conv2d(L.ones(1, 1, 2, 3, 8, 8), L.ones(4, 3, 3, 3)), "conv2d",
     "Expected 3D (unbatched) or 4D (batched) input to conv2d"),
    ("rank 1d", lambda L, F: F.conv1d(L.ones(2, 3, 4, 5), L.ones(4, 3, 3)), "conv1d",
     "Expected 2D (unbatched) or 3D (batched) input to conv1d"),
    ("same strided", lambda L, F: F.conv2d(L.ones(2, 3, 8, 8), L.ones(4, 3, 3, 3), padding="same", stride=2),
     "conv2d", "padding='same' is not supported for strided convolutions"),
    ("bad string", lambda L, F: F.conv2d(L.ones(2, 3, 8, 8), L.ones(4, 3, 3, 3), padding="foo"), "conv2d",
     "Invalid padding string: 'foo'"),
    ("negative padding", lambda L, F: F.conv2d(L.ones(2, 3, 8, 8), L.ones(4, 3, 3, 3), padding=-1), "conv2d",
     "negative padding is not supported"),
    ("zero stride", lambda L, F: F.conv2d(L.ones(2, 3, 8, 8), L.ones(4, 3, 3, 3), stride=0), "conv2d",
     "non-positive stride is not supported"),
    ("zero dilation", lambda L, F: F.conv1d(L.ones(2, 3, 8), L.ones(4, 3, 3), dilation=0), "conv1d",
     "non-positive dilation is not supported"),
    ("zero groups", lambda L, F: F.conv2d(L.ones(2, 3, 8, 8), L.ones(4, 3, 3, 3), groups=0), "conv2d",
     "non-positive groups is not supported"),
    ("bias size", lambda L, F: F.conv2d(L.ones(2, 3, 8, 8), L.ones(4, 3, 3, 3), L.ones(3)), "conv2d",
     "Given weight of size [4, 3, 3, 3], expected bias to be 1-dimensional with 4 elements, but got bias of size [3]"),
    ("stride length", lambda L, F: F.conv2d(L.ones(2, 3, 8, 8), L.ones(4, 3, 3, 3), stride=(1, 2, 3)), "conv2d",
     "expected stride to be a single integer value or a list of 2 values to match the convolution dimensions"),
    ("output padding", lambda L, F: F.conv_transpose2d(L.ones(2, 3, 8, 8), L.ones(3, 2, 3, 3), output_padding=1),
     "conv_transpose2d", "output padding must be smaller than either stride or dilation"),
    ("transposed channels", lambda L, F: F.conv_transpose2d(L.ones(2, 3, 8, 8), L.ones(4, 2, 3, 3)),
     "conv_transpose2d", "Given transposed=1, weight of size [4, 2, 3, 3], expected input[2, 3, 8, 8] to have 4"),
    ("empty weight rows", lambda L, F: F.conv2d(L.ones(2, 3, 5, 5), L.ones(0, 3, 3, 3)), "conv2d",
     "Given groups=1, expected weight to be at least 1 at dimension 0"),
    ("dtypes", lambda L, F: F.conv2d(L.ones(2, 3, 8, 8), L.ones(4, 3, 3, 3, dtype=L.float64)), "conv2d", ""),
    ("empty spatial transposed", lambda L, F: F.conv_transpose1d(L.ones(3, 3, 0), L.ones(3, 2, 3)),
     "conv_transpose1d", "Only zero batch or zero channel inputs are supported"),
]


@pytest.mark.parametrize("name,call,op,text", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name, call, op, text):
    terr, kerr = _messages(call)
    assert type(kerr) is type(terr), (kerr, terr)
    message = str(kerr)
    assert message.startswith(op + ": "), message
    assert text in message, (text, message)
    assert text in str(terr) or not text


def test_zero_size():
    for xs, ws in [((0, 3, 5, 5), (4, 3, 3, 3)), ((2, 0, 5, 5), (4, 0, 3, 3))]:
        x, w = torch.randn(xs), torch.randn(ws)
        check(F.conv2d(to_kael(x), to_kael(w)), TF.conv2d(x, w))
    x, w = torch.randn(0, 3, 4, 4), torch.randn(3, 2, 3, 3)
    check(F.conv_transpose2d(to_kael(x), to_kael(w), stride=2), TF.conv_transpose2d(x, w, stride=2))
    # padding past the kernel: a transposed convolution's output may be empty
    x = torch.randn(2, 3, 8, 8)
    check(F.conv_transpose2d(to_kael(x), to_kael(w), padding=5), TF.conv_transpose2d(x, w, padding=5))


def test_double_backward_is_not_implemented():
    x = kael.randn(1, 2, 5, 5, requires_grad=True)
    w = kael.randn(3, 2, 3, 3, requires_grad=True)
    F.conv2d(x, w).sum().backward()  # first order: fine
    assert x.grad is not None and w.grad is not None
    with pytest.raises(RuntimeError, match="convolution_backward_input: the derivative is not implemented"):
        kael.autograd.grad(F.conv2d(x, w).sum(), [x], create_graph=True)


def test_repeated_calls_and_threads():
    """The cached primitives give the same results on every call, and with 1 or 2 threads."""
    x, w = torch.randn(4, 16, 12, 12), torch.randn(16, 16, 3, 3)
    expected = TF.conv2d(x, w, padding=1)
    threads = kael.get_num_threads()
    try:
        for n in (1, 2, 1):
            kael.set_num_threads(n)
            for _ in range(3):
                check(F.conv2d(to_kael(x), to_kael(w), padding=1), expected)
    finally:
        kael.set_num_threads(threads)


# ---------------------------------------------------------------- layers

LAYERS = [
    ("Conv2d", (3, 4, 3), dict(stride=2, padding=1, bias=False, padding_mode="reflect")),
    ("Conv2d", (4, 6, (3, 2)), dict(groups=2, dilation=(2, 1))),
    ("Conv2d", (3, 4, 3), dict(padding="same", padding_mode="circular")),
    ("Conv2d", (3, 4, 2), dict(padding="same", padding_mode="replicate")),
    ("Conv2d", (3, 4, 4), dict(padding="valid")),
    ("Conv1d", (3, 6, 3), dict(padding="same", groups=3)),
    ("Conv1d", (2, 4, 5), dict(stride=2, padding=2, padding_mode="zeros")),
    ("Conv1d", (2, 4, 4), dict(padding=1, padding_mode="reflect")),
    ("ConvTranspose2d", (3, 4, 3), dict(stride=2, output_padding=1, dilation=2)),
    ("ConvTranspose2d", (4, 6, (2, 3)), dict(groups=2, padding=(0, 1), bias=False)),
    ("ConvTranspose1d", (3, 4, 3), dict(stride=3, padding=1, output_padding=2)),
]


@pytest.mark.parametrize("cls,args,kw", LAYERS, ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(LAYERS)])
def test_layer_matches_torch(cls, args, kw):
    torch.manual_seed(0)
    tm = getattr(torch.nn, cls)(*args, **kw).double()
    km = getattr(nn, cls)(*args, **kw, dtype=kael.float64)
    assert repr(km) == repr(tm)
    assert [(n, tuple(p.shape)) for n, p in km.named_parameters()] == \
           [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    km.load_state_dict({k: to_kael(v) for k, v in tm.state_dict().items()})
    nd = 1 if cls.endswith("1d") else 2
    x = torch.randn((2, args[0]) + (7, 6)[:nd], dtype=torch.float64)
    tx, kx = x.clone().requires_grad_(), to_kael(x).requires_grad_()
    tout, kout = tm(tx), km(kx)
    check(kout, tout.detach(), atol=1e-10, rtol=1e-10)
    tout.sum().backward()
    kout.sum().backward()
    check(kx.grad, tx.grad, atol=1e-10, rtol=1e-10)
    for (n, kp), (_, tp) in zip(km.named_parameters(), tm.named_parameters()):
        check(kp.grad, tp.grad, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("cls", ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"])
def test_layer_init(cls):
    """weight from kaiming_uniform_(a=sqrt(5)): uniform in +-1/sqrt(fan_in), as the bias; fan_in
    from the weight's dims 1... (for a transposed layer that is out_channels / groups * k)."""
    m = getattr(nn, cls)(8, 12, 3, groups=2)
    t = getattr(torch.nn, cls)(8, 12, 3, groups=2)
    assert tuple(m.weight.shape) == tuple(t.weight.shape)
    fan_in = m.weight.shape[1] * math.prod(m.weight.shape[2:])
    bound = 1 / math.sqrt(fan_in)
    w, b = np.array(m.weight.tolist()), np.array(m.bias.tolist())
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert np.abs(b).max() <= bound and np.abs(b).max() > 0.5 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.15 * bound
    assert m.weight.requires_grad and m.bias.requires_grad


def test_layer_errors():
    for kw, text in [(dict(groups=0), "groups must be a positive integer"),
                     (dict(groups=3), "in_channels must be divisible by groups"),
                     (dict(padding="full"), "Invalid padding string"),
                     (dict(padding="same", stride=2), "padding='same' is not supported for strided convolutions"),
                     (dict(padding_mode="mirror"), "padding_mode must be one of")]:
        with pytest.raises(ValueError, match=text):
            torch.nn.Conv2d(4, 6, 3, **kw)
        with pytest.raises(ValueError, match=text):
            nn.Conv2d(4, 6, 3, **kw)
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for ConvTranspose2d'):
        torch.nn.ConvTranspose2d(4, 6, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for ConvTranspose2d'):
        nn.ConvTranspose2d(4, 6, 3, padding_mode="reflect")


def test_conv_transpose_output_size():
    torch.manual_seed(0)
    tm = torch.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1)
    km = nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1)
    km.load_state_dict({k: to_kael(v) for k, v in tm.state_dict().items()})
    x = torch.randn(1, 3, 5, 5)
    for size in [(9, 9), (10, 10), (9, 10), [1, 2, 10, 9]]:
        check(km(to_kael(x), output_size=size), tm(x, output_size=size).detach())


def test_exports():
    for name in ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"]:
        assert getattr(nn, name) is getattr(kael.nn.modules, name)
    for name in ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d"]:
        assert callable(getattr(F, name)) and callable(getattr(kael, name))


def test_lenet_step_matches_torch():
    """Two SGD steps of a small LeNet, from the same weights: losses and weights as torch's."""
    torch.manual_seed(0)
    specs = dict(c1=("Conv2d", (1, 6, 5), dict(padding=2)), c2=("Conv2d", (6, 16, 5), {}),
                 f1=("Linear", (16 * 10 * 10, 10), {}))
    tm = torch.nn.ModuleDict({k: getattr(torch.nn, c)(*a, **kw) for k, (c, a, kw) in specs.items()})
    km = kael.nn.ModuleDict({k: getattr(kael.nn, c)(*a, **kw) for k, (c, a, kw) in specs.items()})
    km.load_state_dict({k: to_kael(v) for k, v in tm.state_dict().items()})
    x, y = torch.randn(8, 1, 14, 14), torch.randint(0, 10, (8,))
    topt = torch.optim.SGD(tm.parameters(), lr=0.1)
    kopt = kael.optim.SGD(km.parameters(), lr=0.1)
    for _ in range(2):
        for m, L, Fn, opt, xx, yy in ((tm, torch, TF, topt, x, y), (km, kael, F, kopt, to_kael(x), to_kael(y))):
            opt.zero_grad()
            h = Fn.relu(m["c1"](xx))
            h = Fn.relu(m["c2"](h))
            loss = Fn.cross_entropy(m["f1"](h.flatten(1) if L is torch else h.flatten(1)), yy)
            loss.backward()
            opt.step()
    for k, v in tm.state_dict().items():
        check(km.state_dict()[k], v, atol=1e-5, rtol=1e-4)
