"""Memory formats against torch: kael.channels_last & co., memory_format= on contiguous,
is_contiguous, clone, to, empty and the *_like factories, Module.to(memory_format=), gradients
through the conversions, and the layout pointwise ops and conv give a channels-last input."""
import pickle

import numpy as np
import pytest
import torch

import kael

FORMATS = ["contiguous_format", "channels_last", "channels_last_3d", "preserve_format"]
SHAPES_4D = [(2, 3, 4, 5), (2, 1, 4, 5), (2, 3, 1, 1), (1, 3, 1, 5), (1, 1, 1, 1), (2, 0, 4, 5), (0, 3, 2, 2)]
SHAPES_5D = [(2, 3, 4, 5, 6), (1, 3, 1, 2, 1), (2, 0, 1, 2, 3)]


def pair(shape, seed=0):
    data = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return kael.tensor(data.ravel()).reshape(shape), torch.tensor(data.ravel()).reshape(shape)  # row-major strides


def layouts(k, t):
    """Views of the same data in several layouts: as is, permuted back from other orders, sliced."""
    out = [(k, t)]
    if k.dim() == 4:
        out.append((k.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2),
                    t.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)))
        out.append((k.permute(0, 1, 3, 2), t.permute(0, 1, 3, 2)))
        out.append((k[:, :, ::2], t[:, :, ::2]))
        out.append((k.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)[:, :, ::2],
                    t.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)[:, :, ::2]))
    if k.dim() == 5:
        out.append((k.permute(0, 2, 3, 4, 1).contiguous().permute(0, 4, 1, 2, 3),
                    t.permute(0, 2, 3, 4, 1).contiguous().permute(0, 4, 1, 2, 3)))
    return out


def same(k, t):
    assert tuple(k.shape) == tuple(t.shape)
    assert tuple(k.stride()) == tuple(t.stride()), (k.stride(), t.stride())
    np.testing.assert_array_equal(k.detach().numpy(), t.detach().numpy())


def outcome(fn):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the class is compared with torch's
        return type(e)


@pytest.mark.parametrize("name", FORMATS)
def test_format_objects(name):
    fmt = getattr(kael, name)
    assert repr(fmt) == repr(getattr(torch, name)).replace("torch.", "kael.")
    assert isinstance(fmt, kael.memory_format)
    assert pickle.loads(pickle.dumps(fmt)) is fmt
    assert len({repr(getattr(kael, n)) for n in FORMATS}) == 4


@pytest.mark.parametrize("shape", SHAPES_4D + SHAPES_5D + [(3, 4), (2, 3, 4)])
@pytest.mark.parametrize("name", FORMATS)
def test_is_contiguous_and_contiguous(shape, name):
    k0, t0 = pair(shape)
    for k, t in layouts(k0, t0):
        kf, tf = getattr(kael, name), getattr(torch, name)
        assert k.is_contiguous(memory_format=kf) == t.is_contiguous(memory_format=tf), (k.stride(), name)
        kr, tr = outcome(lambda: k.contiguous(memory_format=kf)), outcome(lambda: t.contiguous(memory_format=tf))
        if isinstance(tr, type):
            assert kr is tr
            continue
        same(kr, tr)
        assert (kr is k) == (tr is t)
        assert kr.is_contiguous(memory_format=kf) == tr.is_contiguous(memory_format=tf)


def test_rank_errors():
    k, t = pair((2, 3, 4))
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        k.contiguous(memory_format=kael.channels_last)
    with pytest.raises(RuntimeError, match="required rank 5 tensor to use channels_last_3d format"):
        kael.randn(2, 3, 4, 5).to(memory_format=kael.channels_last_3d)
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        kael.empty(2, 3, memory_format=kael.channels_last)
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        k.clone(memory_format=kael.channels_last)
    with pytest.raises(TypeError, match="contiguous.*memory_format"):
        k.contiguous(memory_format=1)
    with pytest.raises(TypeError):
        t.contiguous(memory_format=1)


@pytest.mark.parametrize("shape", SHAPES_4D + SHAPES_5D)
@pytest.mark.parametrize("name", FORMATS)
def test_clone(shape, name):
    k0, t0 = pair(shape, 1)
    for k, t in layouts(k0, t0):
        kf, tf = getattr(kael, name), getattr(torch, name)
        kr, tr = outcome(lambda: k.clone(memory_format=kf)), outcome(lambda: t.clone(memory_format=tf))
        if isinstance(tr, type):
            assert kr is tr
            continue
        same(kr, tr)
        same(kael.clone(k, memory_format=kf), torch.clone(t, memory_format=tf))
        assert kr.data_ptr() != k.data_ptr() or k.numel() == 0


@pytest.mark.parametrize("shape", SHAPES_4D + SHAPES_5D)
@pytest.mark.parametrize("name", FORMATS)
def test_to(shape, name):
    k0, t0 = pair(shape, 2)
    for k, t in layouts(k0, t0):
        kf, tf = getattr(kael, name), getattr(torch, name)
        for kargs, targs in [((), ()), ((kael.float64,), (torch.float64,)), (("cpu",), ("cpu",))]:
            kr = outcome(lambda: k.to(*kargs, memory_format=kf))
            tr = outcome(lambda: t.to(*targs, memory_format=tf))
            if isinstance(tr, type):
                assert kr is tr
                continue
            same(kr, tr)
            assert (kr is k) == (tr is t)
        same(k.to(kael.float64), t.to(torch.float64))  # preserve_format is the default


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 3, 1, 5), (2, 3)])
@pytest.mark.parametrize("name", FORMATS)
def test_factories(shape, name):
    kf, tf = getattr(kael, name), getattr(torch, name)
    kr, tr = outcome(lambda: kael.empty(shape, memory_format=kf)), outcome(lambda: torch.empty(shape, memory_format=tf))
    if isinstance(tr, type):
        assert kr is tr
    else:
        assert tuple(kr.shape) == tuple(tr.shape) and kr.stride() == tr.stride()
    k0, t0 = pair(shape, 3)
    for k, t in layouts(k0, t0):
        for fn, args in (("empty_like", ()), ("zeros_like", ()), ("ones_like", ()), ("full_like", (2.5,)),
                         ("rand_like", ()), ("randn_like", ())):
            kr = outcome(lambda: getattr(kael, fn)(k, *args, memory_format=kf))
            tr = outcome(lambda: getattr(torch, fn)(t, *args, memory_format=tf))
            if isinstance(tr, type):
                assert kr is tr
                continue
            assert tuple(kr.shape) == tuple(tr.shape) and kr.stride() == tr.stride(), (fn, k.stride())
            if fn in ("zeros_like", "ones_like", "full_like"):
                np.testing.assert_array_equal(kr.numpy(), tr.numpy())
            if name == "preserve_format":  # the default
                assert getattr(kael, fn)(k, *args).stride() == tr.stride()
    kr = kael.zeros_like(k0, memory_format=kael.contiguous_format, requires_grad=True)
    assert kr.requires_grad and kr.is_leaf


@pytest.mark.parametrize("name,shape", [("channels_last", (2, 3, 4, 5)), ("channels_last", (1, 3, 1, 5)),
                                        ("channels_last_3d", (2, 3, 2, 2, 3)), ("contiguous_format", (2, 3, 4, 5))])
@pytest.mark.parametrize("how", ["contiguous", "to", "clone", "to_dtype"])
def test_gradients_flow(name, shape, how):
    kf, tf = getattr(kael, name), getattr(torch, name)
    data = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    weight = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    results = []
    for lib, fmt in ((kael, kf), (torch, tf)):
        x = lib.tensor(data, requires_grad=True)
        base = x.permute(0, 1, 3, 2) if x.dim() == 4 else x * 1  # a non-contiguous, non-leaf input
        if how == "contiguous":
            y = base.contiguous(memory_format=fmt)
        elif how == "to":
            y = base.to(memory_format=fmt)
        elif how == "clone":
            y = base.clone(memory_format=fmt)
        else:
            y = base.to(lib.float64, memory_format=fmt)
        w = lib.tensor(weight if x.dim() != 4 else weight.transpose(0, 1, 3, 2).copy()).to(y.dtype)
        (y * w).sum().backward()
        results.append((y, x.grad))
    (ky, kg), (ty, tg) = results
    same(ky, ty)
    np.testing.assert_allclose(kg.numpy(), tg.numpy(), rtol=1e-6, atol=1e-6)


def test_pointwise_and_conv_keep_channels_last():
    k, t = pair((2, 4, 6, 5), 6)
    kc, tc = k.contiguous(memory_format=kael.channels_last), t.contiguous(memory_format=torch.channels_last)
    for fn in (lambda x: x + 1, lambda x: x * x, lambda x: x.relu(), lambda x: x.exp(), lambda x: -x):
        kr, tr = fn(kc), fn(tc)
        assert kr.stride() == tr.stride()
        np.testing.assert_allclose(kr.numpy(), tr.numpy(), rtol=1e-6)
    kconv, tconv = kael.nn.Conv2d(4, 3, 3, padding=1), torch.nn.Conv2d(4, 3, 3, padding=1)
    with torch.no_grad():
        tconv.weight.copy_(torch.tensor(kconv.weight.detach().numpy()))
        tconv.bias.copy_(torch.tensor(kconv.bias.detach().numpy()))
    kr, tr = kconv(kc), tconv(tc)
    assert kr.stride() == tr.stride()
    np.testing.assert_allclose(kr.detach().numpy(), tr.detach().numpy(), rtol=1e-4, atol=1e-5)
    kr, tr = kael.nn.BatchNorm2d(4)(kc), torch.nn.BatchNorm2d(4)(tc)
    assert kr.stride() == tr.stride()
    np.testing.assert_allclose(kr.detach().numpy(), tr.detach().numpy(), rtol=1e-4, atol=1e-5)
    # mixed layouts: the first operand's layout, as torch
    assert (kc + k).stride() == (tc + t).stride() and (k + kc).stride() == (t + tc).stride()
    # max_pool2d: same values; kael's result is row-major where torch's stays channels-last
    kr, tr = kael.nn.functional.max_pool2d(kc, 2), torch.nn.functional.max_pool2d(tc, 2)
    np.testing.assert_array_equal(kr.numpy(), tr.numpy())


def test_module_to_memory_format():
    kael.manual_seed(0)
    km = kael.nn.Sequential(kael.nn.Conv2d(3, 4, 3), kael.nn.BatchNorm2d(4), kael.nn.Linear(2, 2))
    tm = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Linear(2, 2))
    kweight = km[0].weight
    assert km.to(memory_format=kael.channels_last) is km
    tm.to(memory_format=torch.channels_last)
    assert km[0].weight is kweight  # the Parameter object is kept, its data re-laid out
    for (kn, kp), (tn, tp) in zip(km.named_parameters(), tm.named_parameters()):
        assert kn == tn and kp.stride() == tp.stride(), (kn, kp.stride(), tp.stride())
        assert isinstance(kp, kael.nn.Parameter) and kp.requires_grad
    assert kweight.is_contiguous(memory_format=kael.channels_last)
    km.to(kael.float64, memory_format=kael.contiguous_format)
    assert kweight.dtype == kael.float64 and kweight.is_contiguous()
    with pytest.raises(TypeError):
        km.to(memory_format="channels_last")


def test_module_to_channels_last_rejects_5d():
    for lib in (kael, torch):
        module = lib.nn.Module()
        module.weight = lib.nn.Parameter(lib.ones(1, 2, 1, 1, 1))
        with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
            module.to(memory_format=lib.channels_last)


@pytest.mark.parametrize("name", ["clone", "empty_like", "zeros_like", "ones_like", "rand_like", "randn_like"])
def test_the_memory_format_wrappers_reject_a_non_tensor_as_torch(name):
    # found by the fuzz suite: kael.clone(-3) raised AttributeError from the wrapper
    for fmt in (None, "channels_last"):
        kw = {} if fmt is None else {"memory_format": getattr(kael, fmt)}
        tkw = {} if fmt is None else {"memory_format": getattr(torch, fmt)}
        with pytest.raises(TypeError):
            getattr(torch, name)(-3, **tkw)
        with pytest.raises(TypeError):
            getattr(kael, name)(-3, **kw)


# ---- dtype conversions keep the layout (torch's preserve_format), whatever spelling converts

LAYOUTS = {
    "channels_last": lambda L: L.randn(2, 3, 4, 5).contiguous(memory_format=L.channels_last),
    "channels_last_sliced": lambda L: L.randn(2, 3, 4, 5).contiguous(memory_format=L.channels_last)[:, :2],
    "transposed": lambda L: L.randn(5, 4).t(),
    "transposed_step": lambda L: L.randn(5, 4).t()[::2],
    "expanded": lambda L: L.randn(2, 3).expand(4, 2, 3),
    "expanded_middle": lambda L: L.randn(3, 1, 4).expand(3, 2, 4),
    "column_slice": lambda L: L.randn(4, 3)[:, :2],
    "channels_last_3d": lambda L: L.randn(2, 3, 2, 2, 2).contiguous(memory_format=L.channels_last_3d),
}
CONVERSIONS = {
    "double": lambda L, t: t.double(), "float": lambda L, t: t.float(), "half": lambda L, t: t.half(),
    "bfloat16": lambda L, t: t.bfloat16(), "long": lambda L, t: t.long(), "int": lambda L, t: t.int(),
    "bool": lambda L, t: t.bool(), "to_dtype": lambda L, t: t.to(L.float64),
    "to_device_dtype": lambda L, t: t.to("cpu", L.int16), "type": lambda L, t: t.type(L.float64),
    "compare_then_float": lambda L, t: (t > 0).float(),
    # the other preserve_format copies
    "clone": lambda L, t: t.clone(), "empty_like": lambda L, t: L.empty_like(t),
    "zeros_like": lambda L, t: L.zeros_like(t, dtype=L.float64),
}


@pytest.mark.parametrize("conversion", list(CONVERSIONS))
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_conversions_keep_the_layout(layout, conversion):
    kt = CONVERSIONS[conversion](kael, LAYOUTS[layout](kael))
    tt = CONVERSIONS[conversion](torch, LAYOUTS[layout](torch))
    assert tuple(kt.shape) == tuple(tt.shape)
    assert str(kt.dtype).split(".")[1] == str(tt.dtype).split(".")[1]
    assert kt.stride() == tt.stride()


# ---- a leaf's .grad takes the leaf's layout (torch's gradient layout contract)

LEAVES = {
    "channels_last": lambda L: L.randn(2, 3, 4, 5).contiguous(memory_format=L.channels_last),
    "transposed": lambda L: L.randn(5, 4).t(),
    "non_dense": lambda L: L.randn(4, 6)[:, ::2],
    "contiguous": lambda L: L.randn(3, 4),
}
GRADS = {  # a gradient arriving row-major, in the leaf's own layout, or accumulated twice
    "row_major": lambda L, x: (x * L.ones(tuple(x.shape)).contiguous()).sum(),
    "same_layout": lambda L, x: (x * 2).sum(),
    "twice": lambda L, x: (x * 2).sum() + (x * 3).sum(),
}


@pytest.mark.parametrize("grad", list(GRADS))
@pytest.mark.parametrize("leaf", list(LEAVES))
def test_leaf_gradient_layout(leaf, grad):
    strides = {}
    for L in (torch, kael):
        x = LEAVES[leaf](L).detach().requires_grad_()
        GRADS[grad](L, x).backward()
        strides[L.__name__] = x.grad.stride()
    assert strides["kael"] == strides["torch"]
