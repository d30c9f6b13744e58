"""In-place view ops (Note [In-place view ops] in aten/src/native/composites.cpp): t_, transpose_,
squeeze_ and unsqueeze_ against torch: the tensor returned is self, its shape, strides and
storage offset become the view op's, its elements and storage stay; gradients through them;
errors raised before self changes."""
import pytest
import torch

import kael
from helpers import check, to_kael

CASES = [
    ("t_", (4, 3), ()),
    ("t_", (5,), ()),
    ("t_", (), ()),
    ("transpose_", (2, 3, 4), (0, 2)),
    ("transpose_", (2, 3, 4), (-1, 1)),
    ("transpose_", (2, 3), (1, 1)),
    ("squeeze_", (2, 1, 3, 1), ()),
    ("squeeze_", (2, 1, 3, 1), (1,)),
    ("squeeze_", (2, 1, 3, 1), (-1,)),
    ("squeeze_", (2, 1, 3, 1), (0,)),  # a dim of size 2: unchanged
    ("squeeze_", (1,), ()),
    ("unsqueeze_", (2, 3), (0,)),
    ("unsqueeze_", (2, 3), (2,)),
    ("unsqueeze_", (2, 3), (-1,)),
    ("unsqueeze_", (), (0,)),
]


def _layouts(shape):
    """The base tensor in torch, contiguous and as a strided view (every other element of a
    wider tensor, so the strides are not the contiguous ones), each with the kael twin."""
    torch.manual_seed(0)
    base = torch.randn(shape)
    yield base, to_kael(base)
    if len(shape) > 0:
        wide = torch.randn(*shape[:-1], 2 * shape[-1])
        kw = to_kael(wide)
        yield wide[..., ::2], kw[..., ::2]


@pytest.mark.parametrize("op,shape,args", CASES, ids=str)
def test_inplace_view_op_takes_the_view_ops_geometry_as_torch(op, shape, args):
    for t, k in _layouts(shape):
        t_data, k_data = t.data_ptr(), k.data_ptr()
        got = getattr(k, op)(*args)
        want = getattr(t, op)(*args)
        assert got is k and want is t
        assert tuple(k.shape) == tuple(t.shape)
        assert k.stride() == t.stride()
        assert k.storage_offset() == t.storage_offset()
        assert k.data_ptr() == k_data and t.data_ptr() == t_data
        check(k, t)


def test_inplace_view_op_keeps_the_storage_shared():
    t = torch.arange(6.0).reshape(2, 3)
    k = to_kael(t)
    kv, tv = k.view(6), t.view(6)  # a view taken before, over the same storage
    k.t_()
    t.t_()
    k[0, 1] = 100.0
    t[0, 1] = 100.0
    check(kv, tv)
    check(k, t)


@pytest.mark.parametrize("op,shape,args", [c for c in CASES if c[1] != ()], ids=str)
def test_gradient_through_an_inplace_view_op_matches_torch(op, shape, args):
    torch.manual_seed(1)
    x = torch.randn(shape)
    tx = x.clone().requires_grad_(True)
    kx = to_kael(x).requires_grad_(True)
    ty, ky = tx * 2, kx * 2  # non-leaves: their history is rebased onto the op
    getattr(ty, op)(*args)
    getattr(ky, op)(*args)
    # the node of the view op's derivative (torch numbers its overloads its own way)
    assert ky.grad_fn.name().rstrip("0123456789") == ty.grad_fn.name().rstrip("0123456789")
    g = torch.randn(ty.shape)
    (ty * g).sum().backward()
    (ky * to_kael(g)).sum().backward()
    check(kx.grad, tx.grad)


def test_inplace_view_ops_refuse_a_leaf_that_requires_grad_and_a_view_that_requires_grad():
    k = kael.randn(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        k.t_()
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        torch.randn(2, 3, requires_grad=True).t_()
    v = (k * 2)[0]
    with pytest.raises(RuntimeError, match="unsqueeze_: an in-place view op on a view that requires grad"):
        v.unsqueeze_(0)
    assert tuple(v.shape) == (3,) and tuple(k.shape) == (2, 3)
    w = k.detach()[1]  # a view that does not require grad: allowed, as torch
    w.unsqueeze_(0)
    assert tuple(w.shape) == (1, 3)


@pytest.mark.parametrize("op,shape,args,error", [
    ("t_", (2, 3, 4), (), RuntimeError),
    ("transpose_", (2, 3), (0, 5), IndexError),
    ("squeeze_", (2, 1), (2,), IndexError),
    ("unsqueeze_", (2, 3), (3,), IndexError),
    ("unsqueeze_", (2, 3), (-4,), IndexError),
], ids=str)
def test_bad_arguments_raise_torchs_class_and_leave_self_unchanged(op, shape, args, error):
    t = torch.randn(shape)
    k = to_kael(t)
    with pytest.raises(error):
        getattr(t, op)(*args)
    with pytest.raises(error, match=op.rstrip("_")):
        getattr(k, op)(*args)
    assert tuple(k.shape) == shape and k.stride() == t.stride()
    check(k, t)
