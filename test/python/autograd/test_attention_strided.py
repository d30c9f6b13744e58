"""scaled_dot_product_attention on the q, k and v a transformer block gives it: views of one
(B, T, 3C) projection split in three, viewed as heads and transposed to (B, H, T, D), whose last
dim is contiguous but whose rows are 3C apart. The kernels read them in place and write the
output and the gradients laid out as their inputs (a transpose back to (B, T, H, D) is
contiguous, as torch's CPU flash attention); values, gradients and torch's output strides
are compared."""
import pytest
import torch
import torch.nn.functional as TF

import kael
import kael.nn.functional as KF
from helpers import check, to_kael


def heads(lib, proj, B, T, H, D):
    q, k, v = proj.split(H * D, dim=2)
    return [t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("B,T,H,D", [(2, 10, 3, 16), (2, 64, 4, 32), (1, 150, 2, 8), (3, 33, 2, 20)])
@pytest.mark.parametrize("mask", ["causal", "none", "bool", "float"])
def test_split_projection_heads(dtype, B, T, H, D, mask):
    x = torch.randn(B, T, 3 * H * D, dtype=dtype)
    g = torch.randn(B, T, H * D, dtype=dtype)
    kw = {}
    if mask == "causal":
        kw = dict(is_causal=True)
    elif mask == "bool":
        kw = dict(attn_mask=torch.rand(T, T) > 0.3)
        kw["attn_mask"][:, 0] = True
    elif mask == "float":
        kw = dict(attn_mask=torch.randn(T, T, dtype=dtype))
    tx = x.clone().requires_grad_()
    kx = to_kael(x).requires_grad_()
    tq, tk, tv = heads(torch, tx, B, T, H, D)
    kq, kk, kv = heads(kael, kx, B, T, H, D)
    tout = TF.scaled_dot_product_attention(tq, tk, tv, **kw)
    kout = KF.scaled_dot_product_attention(kq, kk, kv, **{n: to_kael(m) if isinstance(m, torch.Tensor) else m
                                                           for n, m in kw.items()})
    tol = dict(atol=1e-5, rtol=1e-4) if dtype == torch.float32 else {}
    check(kout, tout, **tol)
    if dtype == torch.float32:
        assert kout.stride() == tuple(tout.stride())  # (B, T, H, D) underneath, as torch's flash kernel
    assert kout.transpose(1, 2).is_contiguous()
    tout.transpose(1, 2).reshape(B, T, H * D).backward(g)
    kout.transpose(1, 2).reshape(B, T, H * D).backward(to_kael(g))
    check(kx.grad, tx.grad, **tol)


def test_gradients_have_their_inputs_layout():
    B, T, H, D = 2, 12, 3, 8
    x = kael.randn(B, T, 3 * H * D, dtype=kael.float64)
    q, k, v = (t.detach().requires_grad_() for t in heads(kael, x, B, T, H, D))
    out = KF.scaled_dot_product_attention(q, k, v, is_causal=True)
    gq, gk, gv = kael.autograd.grad(out, [q, k, v], kael.ones_like(out))
    for grad in (gq, gk, gv):
        assert grad.shape == (B, H, T, D)
        assert grad.transpose(1, 2).is_contiguous()
    # contiguous inputs keep contiguous gradients
    q, k, v = (kael.randn(B, H, T, D, dtype=kael.float64, requires_grad=True) for _ in range(3))
    out = KF.scaled_dot_product_attention(q, k, v)
    assert out.is_contiguous()
    assert all(grad.is_contiguous() for grad in kael.autograd.grad(out, [q, k, v], kael.ones_like(out)))
