"""Tensor.view(dtype): the elements of a tensor read as another dtype, against torch."""
import itertools

import numpy as np
import pytest
import torch

import kael

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]

# (base shape, how to take a view of it): layouts where a view to a wider or narrower dtype is
# allowed and where it is not (last stride not 1, odd last size, odd offset, odd outer stride, 0-d)
LAYOUTS = {
    "contig": ((4, 8), lambda t: t),
    "rows": ((4, 8), lambda t: t[1:3]),
    "cols": ((4, 8), lambda t: t[:, 2:6]),
    "odd-offset": ((4, 8), lambda t: t.view(-1)[1:9]),
    "odd-cols": ((4, 8), lambda t: t[:, :3]),
    "odd-outer-stride": ((3, 9), lambda t: t[:, :8]),
    "transposed": ((4, 8), lambda t: t.T),
    "step": ((4, 8), lambda t: t[:, ::2]),
    "expanded-rows": ((1, 8), lambda t: t.expand(3, 8)),
    "0d": ((), lambda t: t),
    "empty": ((0, 8), lambda t: t),
    "1-elem-last": ((4, 1), lambda t: t),
}


def _pair(dtype, shape):
    """The same bytes as a torch and a kael tensor of dtype."""
    n = int(np.prod(shape, dtype=np.int64)) * torch.empty((), dtype=getattr(torch, dtype)).element_size()
    raw = (np.arange(n, dtype=np.int64) * 37 % 251).astype(np.uint8)
    if dtype == "bool":
        raw = raw % 2
    if n == 0:
        return torch.empty(shape, dtype=getattr(torch, dtype)), kael.empty(shape, dtype=getattr(kael, dtype))
    t = torch.from_numpy(raw.copy()).view(getattr(torch, dtype)).reshape(shape)
    k = kael.tensor(raw.copy(), dtype=kael.uint8).view(getattr(kael, dtype)).reshape(shape)
    return t, k


def _bytes(x):
    """A tensor's elements as the bytes they hold, through a contiguous copy."""
    lib = torch if isinstance(x, torch.Tensor) else kael
    return x.contiguous().reshape(-1).view(lib.uint8).tolist()


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("src,dst", list(itertools.product(["uint8", "int16", "float32", "float64", "bool"],
                                                           DTYPES)))
def test_view_dtype_against_torch(src, dst, layout):
    shape, take = LAYOUTS[layout]
    t, k = _pair(src, shape)
    t, k = take(t), take(k)
    try:
        tv = t.view(getattr(torch, dst))
    except RuntimeError as e:
        with pytest.raises(RuntimeError) as info:
            k.view(getattr(kael, dst))
        assert str(info.value).endswith("view: " + str(e))
        return
    kv = k.view(getattr(kael, dst))
    assert kv.dtype == getattr(kael, dst)
    assert kv.shape == tuple(tv.shape) and kv.stride() == tv.stride()
    assert kv.storage_offset() == tv.storage_offset()
    assert kv.data_ptr() == k.data_ptr() or kv.numel() == 0
    assert _bytes(kv) == _bytes(tv)
    if dst != "bool":  # (a bool view of bytes other than 0, 1 is another test's)
        np.testing.assert_array_equal(np.array(kv.float().tolist()), np.array(tv.float().tolist()))


def test_view_dtype_shares_memory_and_versions():
    x = kael.zeros(4, dtype=kael.float32)
    v = x.view(kael.int32)
    v[1] = 1065353216  # the bits of 1.0
    assert x.tolist() == [0.0, 1.0, 0.0, 0.0]
    before = x._version
    v.add_(0)
    assert x._version > before


def test_view_dtype_is_not_differentiable_and_has_no_base():
    # as torch: the result requires no grad and is not a view in autograd's sense
    for lib in (torch, kael):
        x = lib.ones(4, requires_grad=True)
        for dt in (lib.float32, lib.int32):
            y = x.view(dt)
            assert not y.requires_grad and y.grad_fn is None and y._base is None


def test_view_dtype_of_a_huge_stride_raises_instead_of_overflowing():
    # a dim of one element may have any stride; in bytes it no longer fits
    x = kael.zeros(2, 1, dtype=kael.float64)[::2 ** 62]
    assert x.stride() == (2 ** 62, 1)
    with pytest.raises(RuntimeError, match="overflow"):
        x.view(kael.uint8)


def test_view_overloads_still_take_sizes():
    k = kael.arange(6)
    assert k.view(2, 3).shape == (2, 3) and k.view((3, 2)).shape == (3, 2) and k.view(-1).shape == (6,)
    # a dtype's name is a dtype (docs/decisions/argument-parsing.md)
    assert k.view("int32").tolist() == k.view(kael.int32).tolist()
    with pytest.raises(ValueError, match="unknown dtype name 'x'"):
        k.view("x")
    with pytest.raises(TypeError):
        k.view(1.5)
