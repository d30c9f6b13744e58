"""kael.autocast against torch.autocast('cpu'): the ops of torch's CPU lists run in bfloat16,
float32 or their widest input dtype, everything else untouched; the values, the gradients of
float32 leaves, the state (nesting, enabled=False, decorator, threads, the weight cast cache)
and small training steps match torch's to bfloat16's tolerance."""
import threading
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import kael
import kael.nn.functional as KF
from helpers import check, to_kael

BF16 = (torch.bfloat16, kael.bfloat16)
BF16_TOL = (1e-5, 1.6e-2)  # check()'s (atol, rtol): torch.testing's bfloat16 tolerance
LIBS = {"torch": torch, "kael": kael}


def autocast_of(lib, **kwargs):
    return lib.autocast(device_type="cpu", **kwargs)


def leaves(*shapes, dtype=torch.float32, requires_grad=True, scale=1.0):
    """The same random leaves in torch and kael."""
    ts = [(torch.randn(s) * scale).to(dtype).requires_grad_(requires_grad) for s in shapes]
    ks = [to_kael(t.detach()).requires_grad_(requires_grad) for t in ts]
    return ts, ks


def run_both(fn, ts, ks, **autocast_kwargs):
    """fn(lib, *tensors) under each library's CPU autocast; the outputs."""
    with autocast_of(torch, **autocast_kwargs):
        tout = fn(torch, *ts)
    with autocast_of(kael, **autocast_kwargs):
        kout = fn(kael, *ks)
    return tout, kout


def check_forward_backward(fn, shapes, out_dtype, dtype=torch.float32, **autocast_kwargs):
    ts, ks = leaves(*shapes, dtype=dtype)
    tout, kout = run_both(fn, ts, ks, **autocast_kwargs)
    assert tout.dtype == out_dtype[0] and kout.dtype is out_dtype[1]
    check(kout, tout.detach())
    # the backward leaves the autocast region, as torch recommends
    tgrad = torch.randn(tout.shape).to(tout.dtype)
    tout.backward(tgrad)
    kout.backward(to_kael(tgrad))
    for t, k in zip(ts, ks):
        assert t.grad.dtype == t.dtype and k.grad.dtype is k.dtype  # leaves get grads of their own dtype
        check(k.grad, t.grad, *BF16_TOL)  # computed in bfloat16, then cast to the leaf's dtype


# ---- lower precision: output in bfloat16, inputs rounded to bfloat16 first

LOWER_CASES = {
    "matmul": (lambda lib, a, b: lib.matmul(a, b), [(5, 7), (7, 3)]),
    "matmul_batched": (lambda lib, a, b: lib.matmul(a, b), [(2, 4, 6), (6, 5)]),
    "mm": (lambda lib, a, b: lib.mm(a, b), [(4, 6), (6, 3)]),
    "bmm": (lambda lib, a, b: lib.bmm(a, b), [(3, 4, 6), (3, 6, 2)]),
    "addmm": (lambda lib, c, a, b: lib.addmm(c, a, b), [(4, 3), (4, 6), (6, 3)]),
    "addmm_bias_row": (lambda lib, c, a, b: lib.addmm(c, a, b, beta=0.5, alpha=2.0), [(3,), (4, 6), (6, 3)]),
    "baddbmm": (lambda lib, c, a, b: lib.baddbmm(c, a, b), [(2, 4, 3), (2, 4, 6), (2, 6, 3)]),
    "F.linear": (lambda lib, x, w, b: lib.nn.functional.linear(x, w, b), [(2, 5, 8), (6, 8), (6,)]),
    "F.linear_2d": (lambda lib, x, w, b: lib.nn.functional.linear(x, w, b), [(5, 8), (6, 8), (6,)]),
    "F.linear_no_bias": (lambda lib, x, w: lib.nn.functional.linear(x, w), [(3, 8), (6, 8)]),
    "F.prelu": (lambda lib, x, w: lib.nn.functional.prelu(x, w), [(3, 4, 5), (4,)]),
    "F.conv1d": (lambda lib, x, w, b: lib.nn.functional.conv1d(x, w, b, padding=1), [(2, 3, 7), (4, 3, 3), (4,)]),
    "F.conv2d": (lambda lib, x, w, b: lib.nn.functional.conv2d(x, w, b, stride=2), [(2, 3, 6, 6), (4, 3, 3, 3), (4,)]),
    "F.conv_transpose1d": (lambda lib, x, w: lib.nn.functional.conv_transpose1d(x, w), [(2, 3, 5), (3, 2, 3)]),
    "F.conv_transpose2d": (lambda lib, x, w: lib.nn.functional.conv_transpose2d(x, w, stride=2),
                           [(1, 3, 4, 4), (3, 2, 3, 3)]),
}


@pytest.mark.parametrize("name", sorted(LOWER_CASES))
def test_lower_precision_ops_run_in_bfloat16(name):
    fn, shapes = LOWER_CASES[name]
    check_forward_backward(fn, shapes, BF16)


SDPA_CASES = {
    "plain": ({}, [(2, 2, 5, 8), (2, 2, 5, 8), (2, 2, 5, 8)]),
    "causal": ({"is_causal": True}, [(1, 2, 6, 4), (1, 2, 6, 4), (1, 2, 6, 4)]),
    "float_mask": ({}, [(1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8), (4, 4)]),
}


@pytest.mark.parametrize("name", sorted(SDPA_CASES))
def test_scaled_dot_product_attention_runs_in_bfloat16(name):
    """The result's dtype is torch's; the values are those of the attention of the inputs rounded
    to bfloat16, computed in float32 and rounded once (torch's bfloat16 kernel also rounds the
    probabilities to bfloat16 before their product with v, one more rounding than kael's), and the
    float32 leaves' gradients those of that computation."""
    kwargs, shapes = SDPA_CASES[name]
    ts, ks = leaves(*shapes)
    with torch.autocast("cpu"):
        assert TF.scaled_dot_product_attention(*ts, **kwargs).dtype == torch.bfloat16
    rounded = [t.bfloat16().float() for t in ts]
    ref = TF.scaled_dot_product_attention(*rounded[:3], attn_mask=rounded[3] if len(ts) > 3 else None,
                                          **kwargs).bfloat16()
    with kael.autocast("cpu"):
        kout = KF.scaled_dot_product_attention(*ks[:3], attn_mask=ks[3] if len(ks) > 3 else None, **kwargs)
    assert kout.dtype is kael.bfloat16
    check(kout, ref.detach())
    grad = torch.randn(ref.shape).bfloat16()
    ref.backward(grad)
    kout.backward(to_kael(grad))
    for t, k in zip(ts, ks):
        assert k.grad.dtype is kael.float32
        check(k.grad, t.grad, *BF16_TOL)


@pytest.mark.parametrize("name", ["matmul", "F.linear"])
def test_lower_precision_ops_take_bfloat16_inputs_as_they_are(name):
    fn, shapes = LOWER_CASES[name]
    check_forward_backward(fn, shapes, BF16, dtype=torch.bfloat16)


def test_float16_autocast_dtype():
    fn, shapes = LOWER_CASES["F.linear"]
    ts, ks = leaves(*shapes)
    with torch.autocast("cpu", dtype=torch.float16):
        tout = fn(torch, *ts)
    with kael.autocast("cpu", dtype=kael.float16):
        kout = fn(kael, *ks)
    assert tout.dtype == torch.float16 and kout.dtype is kael.float16
    check(kout, tout.detach())


def test_mixed_float32_and_bfloat16_inputs_meet_in_bfloat16():
    a = torch.randn(4, 6)
    b = torch.randn(6, 3).bfloat16()
    with torch.autocast("cpu"):
        t = torch.mm(a, b)
    with kael.autocast("cpu"):
        k = kael.mm(to_kael(a), to_kael(b))
    assert k.dtype is kael.bfloat16
    check(k, t)
    with pytest.raises(RuntimeError):  # without autocast both refuse the mixed dtypes
        kael.mm(to_kael(a), to_kael(b))


def test_float64_and_integer_tensors_are_not_cast():
    a, b = torch.randn(3, 4, dtype=torch.float64), torch.randn(4, 2, dtype=torch.float64)
    with torch.autocast("cpu"):
        t = torch.matmul(a, b)
    with kael.autocast("cpu"):
        k = kael.matmul(to_kael(a), to_kael(b))
    assert t.dtype == torch.float64 and k.dtype is kael.float64
    check(k, t)
    ia, ib = torch.randint(-3, 3, (3, 4)), torch.randint(-3, 3, (4, 2))
    with kael.autocast("cpu"):
        k = kael.matmul(to_kael(ia), to_kael(ib))
    assert k.dtype is kael.int64
    check(k, ia @ ib)


# ---- float32: output in float32 from bfloat16 inputs

FP32_CASES = {
    "prod": (lambda lib, x: lib.prod(x), [(3, 4)], 0.5),
    "prod_dim": (lambda lib, x: lib.prod(x, 1), [(3, 4)], 0.5),
    "cross_entropy": (lambda lib, x: lib.nn.functional.cross_entropy(x, lib.tensor([1, 0, 3])), [(3, 5)], 1.0),
    "mse_loss": (lambda lib, x, y: lib.nn.functional.mse_loss(x, y), [(4, 3), (4, 3)], 1.0),
    "l1_loss": (lambda lib, x, y: lib.nn.functional.l1_loss(x, y), [(4, 3), (4, 3)], 1.0),
    "smooth_l1_loss": (lambda lib, x, y: lib.nn.functional.smooth_l1_loss(x, y), [(4, 3), (4, 3)], 1.0),
    "huber_loss": (lambda lib, x, y: lib.nn.functional.huber_loss(x, y), [(4, 3), (4, 3)], 1.0),
    "nll_loss": (lambda lib, x: lib.nn.functional.nll_loss(x, lib.tensor([1, 0, 3])), [(3, 5)], 1.0),
    "bce_with_logits": (lambda lib, x, y: lib.nn.functional.binary_cross_entropy_with_logits(x, y.sigmoid()),
                        [(4, 3), (4, 3)], 1.0),
    "soft_margin_loss": (lambda lib, x, y: lib.nn.functional.soft_margin_loss(x, y.detach().sign()), [(4, 3), (4, 3)],
                         1.0),
    "trace": (lambda lib, x: lib.trace(x), [(4, 4)], 1.0),
    "cdist": (lambda lib, x, y: lib.cdist(x, y), [(3, 4), (5, 4)], 1.0),
}


@pytest.mark.parametrize("name", sorted(FP32_CASES))
def test_float32_ops_run_in_float32(name):
    fn, shapes, scale = FP32_CASES[name]
    ts, ks = leaves(*shapes, dtype=torch.bfloat16, scale=scale)
    tout, kout = run_both(fn, ts, ks)
    assert tout.dtype == torch.float32 and kout.dtype is kael.float32
    check(kout, tout.detach())
    tout.sum().backward()
    kout.sum().backward()
    for t, k in zip(ts, ks):
        assert (t.grad is None) == (k.grad is None)
        if t.grad is not None:
            assert k.grad.dtype is kael.bfloat16
            check(k.grad, t.grad)


def test_quantile_runs_in_float32():
    x = torch.randn(4, 7).bfloat16()
    with torch.autocast("cpu"):
        t = torch.quantile(x, 0.3, dim=1)
    with kael.autocast("cpu"):
        k = kael.quantile(to_kael(x), 0.3, dim=1)
    assert k.dtype is kael.float32
    check(k, t)


def test_a_float32_loss_after_a_bfloat16_layer():
    fn = lambda lib, x, w, y: lib.nn.functional.mse_loss(lib.nn.functional.linear(x, w), y)  # noqa: E731
    ts, ks = leaves((4, 6), (3, 6), (4, 3))
    tout, kout = run_both(fn, ts, ks)
    assert kout.dtype is kael.float32
    check(kout, tout.detach())
    tout.backward()
    kout.backward()
    for t, k in zip(ts, ks):
        assert k.grad.dtype is kael.float32
        check(k.grad, t.grad, *BF16_TOL)


# ---- promote: the widest input dtype

@pytest.mark.parametrize("op", ["cat", "stack"])
def test_cat_and_stack_promote_to_the_widest_input(op):
    a, b = torch.randn(2, 3).bfloat16(), torch.randn(2, 3)
    with torch.autocast("cpu"):
        t = getattr(torch, op)([a, b])
        t16 = getattr(torch, op)([a, a])
    with kael.autocast("cpu"):
        k = getattr(kael, op)([to_kael(a), to_kael(b)])
        k16 = getattr(kael, op)([to_kael(a), to_kael(a)])
    assert k.dtype is kael.float32 and k16.dtype is kael.bfloat16
    check(k, t)
    check(k16, t16)


def test_index_copy_promotes_its_self_and_source():
    self_, src = torch.randn(4, 3).bfloat16(), torch.randn(2, 3)
    idx = torch.tensor([3, 0])
    with torch.autocast("cpu"):
        t = torch.index_copy(self_, 0, idx, src)
    with kael.autocast("cpu"):
        k = kael.index_copy(to_kael(self_), 0, to_kael(idx), to_kael(src))
    assert k.dtype is kael.float32
    check(k, t)


def test_promote_refuses_float16_with_bfloat16_as_torch():
    a, b = torch.randn(2).half(), torch.randn(2).bfloat16()
    with torch.autocast("cpu"), pytest.raises(RuntimeError):
        torch.cat([a, b])
    with kael.autocast("cpu"), pytest.raises(RuntimeError, match="cat: autocast found arguments of dtypes"):
        kael.cat([to_kael(a), to_kael(b)])


# ---- everything else runs untouched

UNTOUCHED = {
    "add": lambda lib, x, y: x + y,
    "relu": lambda lib, x, y: lib.relu(x),
    "softmax": lambda lib, x, y: lib.softmax(x, -1),
    "sum": lambda lib, x, y: x.sum(),
    "layer_norm": lambda lib, x, y: lib.nn.functional.layer_norm(x, (3,)),
    "gelu": lambda lib, x, y: lib.nn.functional.gelu(x),
    "exp": lambda lib, x, y: lib.exp(x),
    "mul_mixed": lambda lib, x, y: x * y.bfloat16(),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(UNTOUCHED))
def test_other_ops_keep_their_dtype(name, dtype):
    fn = UNTOUCHED[name]
    ts, ks = leaves((4, 3), (4, 3), dtype=dtype)
    tout, kout = run_both(fn, ts, ks)
    assert kout.dtype is to_kael(tout.detach()).dtype
    check(kout, tout.detach())


def test_registered_autocast_ops_are_torchs_cpu_lists():
    """Every registry op with an autocast kernel has one in torch's AutocastCPU, with the policy
    torch's kernel shows (the dtype of its result from float32 / bfloat16 inputs)."""
    ops = dict(kael._C._autocast_ops())
    torch_ops = {name.split("::")[1].split(".")[0]
                 for name in torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCPU")}
    names = {name.split(".")[0] for name in ops}
    assert {"linear", "matmul", "addmm", "bmm", "baddbmm", "scaled_dot_product_attention", "prod", "cat", "stack",
            "index_copy", "cross_entropy_losses"} <= names
    assert names - {"cross_entropy_losses"} <= torch_ops  # kael's cross_entropy_loss has its own name
    policies = {name.split(".")[0]: p for name, p in ops.items()}
    assert {policies[n] for n in ("linear", "matmul", "addmm", "bmm", "baddbmm", "scaled_dot_product_attention")} == {0}
    assert policies["prod"] == policies["cross_entropy_losses"] == 1
    assert policies["cat"] == policies["stack"] == policies["index_copy"] == 2
    # ops added to the registry later join by name: the convolutions where kael has them
    for conv in ("conv1d", "conv2d", "conv_transpose2d"):
        if kael._C._registered_ops().count(conv):
            assert conv in names


# ---- the state: nesting, enabled=False, decorator, threads

def test_state_functions_follow_the_context():
    assert not kael.is_autocast_enabled("cpu") and kael.get_autocast_dtype("cpu") is kael.bfloat16
    with kael.autocast("cpu", dtype=kael.float16) as ctx:
        assert isinstance(ctx, kael.autocast)
        assert kael.is_autocast_enabled("cpu") and kael.get_autocast_dtype("cpu") is kael.float16
        assert not kael.is_autocast_enabled("cuda") and not kael.is_autocast_enabled()
        with kael.autocast("cpu", enabled=False):
            assert not kael.is_autocast_enabled("cpu")
            assert kael.get_autocast_dtype("cpu") is kael.float16  # dtype=None: the current one
            with torch.autocast("cpu", dtype=torch.float16), torch.autocast("cpu", enabled=False):
                assert torch.get_autocast_dtype("cpu") == torch.float16
        assert kael.is_autocast_enabled("cpu") and kael.get_autocast_dtype("cpu") is kael.float16
    assert not kael.is_autocast_enabled("cpu") and kael.get_autocast_dtype("cpu") is kael.bfloat16
    kael.set_autocast_enabled("cpu", True)
    try:
        assert kael.is_autocast_enabled("cpu")
        assert kael.mm(kael.ones(2, 2), kael.ones(2, 2)).dtype is kael.bfloat16
    finally:
        kael.set_autocast_enabled("cpu", False)
    assert kael.mm(kael.ones(2, 2), kael.ones(2, 2)).dtype is kael.float32
    assert kael.autocast_increment_nesting() == torch.autocast_increment_nesting() == 1
    assert kael.autocast_decrement_nesting() == torch.autocast_decrement_nesting() == 0


def test_nesting_and_disable_inside():
    ts, ks = leaves((3, 4), (4, 2))
    results = {}
    for name, lib in LIBS.items():
        a, b = (ts if name == "torch" else ks)
        out = []
        with lib.autocast("cpu"):
            out.append(lib.mm(a, b).dtype)
            with lib.autocast("cpu", enabled=False):
                out.append(lib.mm(a, b).dtype)
                with lib.autocast("cpu"):
                    out.append(lib.mm(a, b).dtype)
                out.append(lib.mm(a, b).dtype)
            out.append(lib.mm(a, b).dtype)
        out.append(lib.mm(a, b).dtype)
        results[name] = [str(d).split(".")[-1] for d in out]
    assert results["kael"] == results["torch"] == ["bfloat16", "float32", "bfloat16", "float32", "bfloat16",
                                                   "float32"]


def test_decorator():
    @kael.autocast("cpu")
    def f(a, b):
        """doc"""
        assert kael.is_autocast_enabled("cpu")
        return kael.matmul(a, b)

    assert f.__name__ == "f" and f.__doc__ == "doc"
    assert f(kael.ones(2, 3), kael.ones(3, 2)).dtype is kael.bfloat16
    assert not kael.is_autocast_enabled("cpu")
    with pytest.raises(TypeError, match=r"autocast\(\)\(func\) requires a callable, but got int"):
        kael.autocast("cpu")(3)


def test_exceptions_restore_the_state():
    with pytest.raises(ValueError):
        with kael.autocast("cpu"):
            raise ValueError("inside")
    assert not kael.is_autocast_enabled("cpu") and kael._C._autocast_cache_size() == 0


def test_bad_arguments_raise_as_torch():
    for lib in LIBS.values():
        with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
            lib.autocast(1)
        with pytest.raises(RuntimeError):
            lib.autocast("xyz")
        with pytest.raises(TypeError, match=r"set_autocast_enabled\(\): argument 'enabled' \(position 2\) must be bool"):
            lib.set_autocast_enabled("cpu", 1)
    for lib, f32 in ((torch, torch.float32), (kael, kael.float32)):
        with pytest.warns(UserWarning, match="In CPU autocast, but the target dtype is not supported"):
            ctx = lib.autocast("cpu", dtype=f32)
        with ctx:
            assert not lib.is_autocast_enabled("cpu")


def test_cuda_autocast_without_cuda_disables_itself():
    assert not kael.cuda.is_available()
    with pytest.warns(UserWarning, match="CUDA is not available"):
        ctx = kael.autocast("cuda")
    with ctx:
        assert not kael.is_autocast_enabled("cuda")
    assert kael.amp.autocast_mode.is_autocast_available("cpu") and kael.amp.autocast_mode.is_autocast_available("cuda")


def test_deprecated_spellings_warn_as_torch():
    import kael.cpu.amp
    import kael.cuda.amp.autocast_mode as cuda_amp

    with pytest.warns(FutureWarning, match=r"`kael.cpu.amp.autocast\(args...\)` is deprecated"):
        ctx = kael.cpu.amp.autocast()
    assert isinstance(ctx, kael.autocast)
    with ctx:
        assert kael.is_autocast_enabled("cpu") and kael.get_autocast_dtype("cpu") is kael.bfloat16
    with pytest.warns(FutureWarning, match=r"`kael.cuda.amp.autocast\(args...\)` is deprecated"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            cuda_amp.autocast()
    with pytest.warns(DeprecationWarning):
        assert kael.is_autocast_cpu_enabled() is False
    with pytest.warns(DeprecationWarning):
        assert kael.get_autocast_cpu_dtype() is kael.bfloat16


def test_each_thread_has_its_own_state():
    seen = {}

    def worker(name, enter):
        if enter:
            with kael.autocast("cpu"):
                seen[name] = (kael.is_autocast_enabled("cpu"), kael.mm(kael.ones(2, 2), kael.ones(2, 2)).dtype)
        else:
            seen[name] = (kael.is_autocast_enabled("cpu"), kael.mm(kael.ones(2, 2), kael.ones(2, 2)).dtype)

    with kael.autocast("cpu"):
        t = threading.Thread(target=worker, args=("inside", False))
        t.start()
        t.join()
        assert kael.is_autocast_enabled("cpu")
    t = threading.Thread(target=worker, args=("own", True))
    t.start()
    t.join()
    assert not kael.is_autocast_enabled("cpu")
    assert seen == {"inside": (False, kael.float32), "own": (True, kael.bfloat16)}


# ---- grad mode and the weight cast cache

def test_no_grad_inside_autocast():
    x = torch.randn(3, 4)
    w = torch.randn(2, 4, requires_grad=True)
    kw = to_kael(w.detach()).requires_grad_()
    with torch.no_grad(), torch.autocast("cpu"):
        t = TF.linear(x, w)
    with kael.no_grad(), kael.autocast("cpu"):
        k = KF.linear(to_kael(x), kw)
    assert k.dtype is kael.bfloat16 and not k.requires_grad and not t.requires_grad
    check(k, t)
    with kael.autocast("cpu"):
        with kael.no_grad():
            k1 = KF.linear(to_kael(x), kw)
        k2 = KF.linear(to_kael(x), kw)
    assert not k1.requires_grad and k2.requires_grad and k2.dtype is kael.bfloat16


def test_weight_casts_are_cached_for_the_context():
    lin = kael.nn.Linear(4, 3)
    x = kael.randn(2, 4)
    with kael.autocast("cpu"):
        y1 = lin(x)
        assert kael._C._autocast_cache_size() == 2  # the weight and the bias, once
        y2 = lin(x * 2)
        assert kael._C._autocast_cache_size() == 2
        lin(x.requires_grad_())  # a leaf input is cast too, and cached as torch does
        kael.mm(kael.randn(2, 4), kael.randn(4, 3))  # not leaves requiring grad: not cached
        assert kael._C._autocast_cache_size() == 3
        with kael.autocast("cpu"):
            pass  # an inner exit keeps the cache
        assert kael._C._autocast_cache_size() == 3
    assert kael._C._autocast_cache_size() == 0
    (y1.float().sum() + y2.float().sum()).backward()
    tw = torch.tensor(lin.weight.detach().tolist(), requires_grad=True)
    tb = torch.tensor(lin.bias.detach().tolist(), requires_grad=True)
    tx = torch.tensor(x.detach().tolist())
    with torch.autocast("cpu"):
        t = TF.linear(tx, tw, tb).float().sum() + TF.linear(tx * 2, tw, tb).float().sum()
    t.backward()
    check(lin.weight.grad, tw.grad, *BF16_TOL)
    check(lin.bias.grad, tb.grad, *BF16_TOL)
    with kael.autocast("cpu", cache_enabled=False):
        lin(x)
        assert kael._C._autocast_cache_size() == 0


def test_the_cache_casts_each_weight_once_per_forward():
    lin = kael.nn.Linear(8, 8)
    x = kael.randn(4, 8)

    def forward():
        with kael.autocast("cpu"):
            return lin(lin(lin(x)))

    _, ops = kael._C._trace_dispatch(forward)
    casts = [op for op in ops if op.startswith(("to.", "_to_copy", "copy_"))]
    with kael.autocast("cpu", cache_enabled=False):
        _, uncached = kael._C._trace_dispatch(lambda: lin(lin(lin(x))))
    uncached_casts = [op for op in uncached if op.startswith(("to.", "_to_copy", "copy_"))]
    assert 0 < len(casts) < len(uncached_casts)


# ---- custom autograd Functions

def test_custom_fwd_and_bwd():
    seen = {}

    class Square(kael.autograd.Function):
        @staticmethod
        @kael.amp.autocast_mode.custom_fwd(device_type="cpu", cast_inputs=kael.float32)
        def forward(ctx, x):
            seen["fwd"] = (x.dtype, kael.is_autocast_enabled("cpu"))
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @kael.amp.autocast_mode.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            seen["bwd"] = kael.is_autocast_enabled("cpu")
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = kael.randn(3).bfloat16().requires_grad_()
    with kael.autocast("cpu"):
        y = Square.apply(x)
    assert y.dtype is kael.float32 and seen["fwd"] == (kael.float32, False)
    y.sum().backward()
    assert seen["bwd"] is False and x.grad.dtype is kael.bfloat16

    class Keep(kael.autograd.Function):
        @staticmethod
        @kael.amp.autocast_mode.custom_fwd(device_type="cpu")
        def forward(ctx, a, b):
            return kael.mm(a, b)

        @staticmethod
        @kael.amp.autocast_mode.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            seen["bwd_state"] = (kael.is_autocast_enabled("cpu"), kael.get_autocast_dtype("cpu"))
            return g, g

    with kael.autocast("cpu"):
        out = Keep.apply(kael.ones(2, 2, requires_grad=True), kael.ones(2, 2))
    assert out.dtype is kael.bfloat16
    out.sum().backward()
    assert seen["bwd_state"] == (True, kael.bfloat16)


# ---- training steps against torch's

def _copy_params(tmodule, kmodule):
    for (tn, tp), (kn, kp) in zip(tmodule.named_parameters(), kmodule.named_parameters()):
        assert tn == kn
        with kael.no_grad():
            kp.copy_(to_kael(tp.detach()))


def _mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 5))


def _torch_attention_rounded_once(q, k, v, is_causal):
    """torch's attention of bfloat16 q, k, v computed in float32 and rounded once, as kael's
    bfloat16 attention is (torch's bfloat16 kernel rounds the probabilities to bfloat16 too;
    test_scaled_dot_product_attention_runs_in_bfloat16)."""
    with torch.autocast("cpu", enabled=False):
        return TF.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=is_causal).bfloat16()


def _block(lib):
    nn, F = lib.nn, lib.nn.functional
    attention = _torch_attention_rounded_once if lib is torch else F.scaled_dot_product_attention

    class Block(nn.Module):
        def __init__(self, c=16, h=2):
            super().__init__()
            self.h = h
            self.ln1, self.ln2 = nn.LayerNorm(c), nn.LayerNorm(c)
            self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
            self.fc, self.out = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
            self.head = nn.Linear(c, 7)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
            assert q.dtype == lib.bfloat16
            y = attention(q, k, v, is_causal=True).transpose(1, 2).contiguous().view(b, t, c)
            x = x + self.proj(y)
            x = x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
            return self.head(x)

    return Block()


@pytest.mark.parametrize("make, shape", [(_mlp, (6, 12)), (_block, (2, 5, 16))])
def test_training_step_matches_torch(make, shape):
    torch.manual_seed(0)
    tm, km = make(torch), make(kael)
    _copy_params(tm, km)
    x = torch.randn(*shape)
    target = torch.randint(0, 5, shape[:-1])
    topt = torch.optim.SGD(tm.parameters(), lr=0.1)
    kopt = kael.optim.SGD(km.parameters(), lr=0.1)
    for _ in range(2):
        with torch.autocast("cpu"):
            tout = tm(x)
            tloss = TF.cross_entropy(tout.reshape(-1, tout.shape[-1]), target.reshape(-1))
        with kael.autocast("cpu"):
            kout = km(to_kael(x))
            kloss = KF.cross_entropy(kout.reshape(-1, kout.shape[-1]), to_kael(target).reshape(-1))
        assert kout.dtype is kael.bfloat16 and kloss.dtype is kael.float32
        check(kout, tout.detach(), *BF16_TOL)
        check(kloss, tloss.detach(), *BF16_TOL)
        topt.zero_grad()
        kopt.zero_grad()
        tloss.backward()
        kloss.backward()
        for (n, tp), kp in zip(tm.named_parameters(), km.parameters()):
            assert kp.grad.dtype is kael.float32, n
            check(kp.grad, tp.grad, *BF16_TOL)
        topt.step()
        kopt.step()
        for tp, kp in zip(tm.parameters(), km.parameters()):
            check(kp.detach(), tp.detach(), *BF16_TOL)


def test_autocast_loss_curve_follows_float32():
    """A small GPT-style model trained 25 steps in float32 and under autocast from the same
    start: every autocast loss within 2% of the float32 one (tools/bench/autocast.py runs 200)."""
    def run(use_autocast):
        kael.manual_seed(0)
        model = kael.nn.Sequential(kael.nn.Embedding(64, 32), kael.nn.Linear(32, 64), kael.nn.GELU(),
                                   kael.nn.Linear(64, 64))
        opt = kael.optim.AdamW(model.parameters(), lr=3e-3)
        rng = np.random.default_rng(0)
        losses = []
        for _ in range(25):
            idx = rng.integers(0, 64, size=(8, 16))
            x, y = kael.tensor(idx), kael.tensor((idx * 7 + 3) % 64)
            with kael.autocast("cpu", enabled=use_autocast):
                logits = model(x)
                loss = KF.cross_entropy(logits.reshape(-1, 64), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return np.array(losses)

    f32, amp = run(False), run(True)
    assert f32[-1] < 0.7 * f32[0]  # it learns
    assert np.all(np.abs(amp - f32) <= 0.02 * f32), (f32, amp)


def test_the_names_torch_exports():
    assert kael.amp.autocast is kael.autocast
    assert sorted(kael.amp.__all__) == sorted(torch.amp.__all__)
    for name in ("is_autocast_enabled", "set_autocast_enabled", "get_autocast_dtype", "set_autocast_dtype",
                 "is_autocast_cache_enabled", "set_autocast_cache_enabled", "clear_autocast_cache",
                 "autocast_increment_nesting", "autocast_decrement_nesting"):
        assert callable(getattr(kael, name)) and hasattr(torch, name), name


def test_cpu_amp_grad_scaler_is_the_deprecated_spelling():
    import kael.cpu.amp

    with pytest.warns(FutureWarning, match=r"`kael.cpu.amp.GradScaler\(args...\)` is deprecated"):
        scaler = kael.cpu.amp.GradScaler(init_scale=8.0)
    with pytest.warns(FutureWarning):
        tscaler = torch.cpu.amp.GradScaler(init_scale=8.0)
    assert isinstance(scaler, kael.amp.GradScaler)
    assert scaler.get_scale() == tscaler.get_scale() == 8.0


def test_python_composites_as_methods():
    a, b = torch.randn(3, 4), torch.randn(4, 2).bfloat16()
    with torch.autocast("cpu"):
        tm, tt, tq = a.mm(b), a[:, :3].bfloat16().trace(), a.bfloat16().quantile(0.5)
    with kael.autocast("cpu"):
        km, kt, kq = to_kael(a).mm(to_kael(b)), to_kael(a)[:, :3].bfloat16().trace(), to_kael(a).bfloat16().quantile(0.5)
    for k, t in ((km, tm), (kt, tt), (kq, tq)):
        assert k.dtype is to_kael(t).dtype
        check(k, t)


def test_python_autocast_shim_wraps_no_registry_op():
    # A registry op gets autocast from the Autocast key (aten/src/autocast/autocast.cpp); the
    # Python shim is for composites written in Python only. A name in both is cast twice, and its
    # out= tensor cast into a copy that the result is written to (mm, trace, cdist once were).
    import sys
    from pathlib import Path
    from kael.amp.autocast_mode import PYTHON_COMPOSITES
    root = Path(__file__).resolve().parents[3]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from codegen.model import parse_registry
    registry = {f.name for f in parse_registry((root / "native_functions.yaml").read_text(), "native_functions.yaml")}
    both = sorted((set(PYTHON_COMPOSITES["kael"]) | set(PYTHON_COMPOSITES["kael.nn.functional"])) & registry)
    assert not both, f"registry ops also wrapped by the Python autocast shim: {both}"
