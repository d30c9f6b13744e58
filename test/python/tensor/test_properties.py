"""Tensor properties and conversions: dtype objects, device, shape, item, tolist, to, repr, ..."""
import math

import pytest
import torch

import kael
from helpers import DTYPE_NAMES, check, compare, kdtype, make_pair, tdtype


# ------------------------------------------------------------------ dtypes ---
@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_dtype_singletons_and_str(name):
    d = getattr(kael, name)
    assert d is getattr(kael, name)
    assert str(d) == f"kael.{name}"
    assert kael.zeros(1, dtype=d).dtype is d
    assert kael.zeros(1, dtype=name).dtype is d


def test_dtypes_are_distinct():
    ds = [kael.float32, kael.float64, kael.int64, kael.bool]
    for i in range(4):
        for j in range(4):
            assert (ds[i] is ds[j]) == (i == j)
            assert (ds[i] == ds[j]) == (i == j)


def test_default_dtype_is_float32():
    assert kael.zeros(2).dtype is kael.float32
    assert kael.ones(2, 2).dtype is kael.float32
    assert kael.empty(3).dtype is kael.float32
    assert kael.eye(2).dtype is kael.float32


# ------------------------------------------------------------------ device ---
def test_device_is_the_cpu_device_object():
    for k in (kael.zeros(2), kael.tensor([1, 2]), kael.ones(2, 2).T, kael.zeros(3) + 1):
        assert k.device == "cpu" and str(k.device) == "cpu"
        assert type(k.device) is kael.device


# ------------------------------------------------------------ shape & co ---
@pytest.mark.parametrize("shape", [(), (0,), (5,), (3, 4), (2, 3, 4), (2, 0, 3), (1, 1, 1, 1)], ids=str)
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_shape_size_ndim_numel_stride(shape, dtype):
    p = make_pair(shape, dtype)
    k, t = p.k, p.t
    assert k.shape == tuple(t.shape) and type(k.shape) is kael.Size
    assert k.size() == tuple(t.size()) and type(k.size()) is kael.Size
    for d in range(-len(shape), len(shape)):
        assert k.size(d) == t.size(d) and type(k.size(d)) is int
        assert k.stride(d) == t.stride(d) and type(k.stride(d)) is int
    assert k.ndim == t.ndim == k.dim() == len(shape)
    assert k.numel() == t.numel() and type(k.numel()) is int
    assert k.stride() == tuple(t.stride()) and type(k.stride()) is tuple
    assert k.is_contiguous() is True
    assert k.element_size() == t.element_size()


@pytest.mark.parametrize("name,size", [("float32", 4), ("float64", 8), ("int64", 8), ("bool", 1)])
def test_element_size(name, size):
    assert kael.zeros(3, dtype=getattr(kael, name)).element_size() == size


@pytest.mark.parametrize("layout,shape", [("T", (3, 4)), ("step", (3, 4)), ("transpose", (2, 3, 4)),
                                          ("expand", (3, 4))])
def test_noncontiguous_properties(layout, shape):
    p = make_pair(shape, "float32", layout)
    assert p.k.stride() == tuple(p.t.stride())
    assert p.k.is_contiguous() is False
    assert p.k.numel() == p.t.numel()
    assert p.k.shape == tuple(p.t.shape)


def test_data_ptr_is_int_and_distinct_between_tensors():
    a, b = kael.zeros(4), kael.zeros(4)
    assert type(a.data_ptr()) is int
    assert a.data_ptr() != 0 and a.data_ptr() != b.data_ptr()
    assert a[1:].data_ptr() == a.data_ptr() + a.element_size()
    assert a.T.data_ptr() == a.data_ptr()


# ------------------------------------------------------------------- item ---
@pytest.mark.parametrize("value,dtype,pytype", [
    (2.5, "float32", float), (-1.25, "float64", float), (7, "int64", int), (2 ** 62 + 1, "int64", int),
    (True, "bool", bool), (False, "bool", bool), (0.1, "float32", float), (0.1, "float64", float),
])
def test_item_type_and_value(value, dtype, pytype):
    k = kael.tensor(value, dtype=kdtype(dtype))
    t = torch.tensor(value, dtype=tdtype(dtype))
    v = k.item()
    assert type(v) is pytype
    assert v == t.item()


def test_item_of_single_element_nd_tensor_and_views():
    assert kael.tensor([[3.5]]).item() == 3.5
    assert kael.tensor([1, 2, 3])[2].item() == 3
    assert kael.arange(12).reshape(3, 4).T[1, 2].item() == torch.arange(12).reshape(3, 4).T[1, 2].item()


def test_item_of_multi_element_tensor_raises():
    with pytest.raises(RuntimeError):
        torch.zeros(2).item()
    with pytest.raises((RuntimeError, ValueError)):
        kael.zeros(2).item()
    with pytest.raises((RuntimeError, ValueError)):
        kael.zeros(0).item()


def test_item_special_floats():
    k = kael.tensor([float("nan"), float("inf"), -float("inf")])
    assert math.isnan(k[0].item())
    assert k[1].item() == math.inf and k[2].item() == -math.inf


# ----------------------------------------------------------------- tolist ---
@pytest.mark.parametrize("shape", [(), (0,), (4,), (2, 3), (2, 0), (2, 3, 2)], ids=str)
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("layout", ["contig", "T"])
def test_tolist_matches_torch(shape, dtype, layout):
    if layout == "T" and len(shape) < 2:
        layout = "contig"
    p = make_pair(shape, dtype, layout)
    kl, tl = p.k.tolist(), p.t.tolist()
    assert kl == tl

    def types(x):
        return [types(y) for y in x] if isinstance(x, list) else type(x)
    assert types(kl) == types(tl)


def test_tolist_of_0d_returns_python_scalar():
    assert kael.tensor(3).tolist() == 3 and type(kael.tensor(3).tolist()) is int
    assert type(kael.tensor(3.0).tolist()) is float
    assert kael.tensor(True).tolist() is True


def test_tolist_float32_values_are_exact_float32():
    data = [0.1, 1 / 3, 1e-7, 123456.789]
    assert kael.tensor(data).tolist() == torch.tensor(data).tolist()
    assert kael.tensor(data, dtype=kael.float64).tolist() == data


# --------------------------------------------------------------------- to ---
@pytest.mark.parametrize("src", DTYPE_NAMES)
@pytest.mark.parametrize("dst", DTYPE_NAMES)
@pytest.mark.parametrize("layout", ["contig", "T", "step"])
def test_to_dtype_conversion(src, dst, layout):
    # float -> int64 truncates toward zero; nonzero -> True
    compare(lambda lib, x: x.to(getattr(lib, dst)), ((3, 4), src, layout))


def test_to_conversion_edge_values():
    data = [-2.7, -0.5, -0.0, 0.0, 0.4, 1.5, 2.9, 1e10]
    for dst in ("int64", "bool", "float64"):
        check(kael.tensor(data).to(kdtype(dst)), torch.tensor(data).to(tdtype(dst)))
    big = [2 ** 62, -(2 ** 53) - 1, 3]
    check(kael.tensor(big).to(kael.float64), torch.tensor(big).to(torch.float64))
    check(kael.tensor(big).to(kael.float32), torch.tensor(big).to(torch.float32))
    check(kael.tensor([float("nan"), float("inf")]).to(kael.bool), torch.tensor([float("nan"), float("inf")]).to(torch.bool))


@pytest.mark.parametrize("dst", DTYPE_NAMES)
def test_to_accepts_dtype_name_string(dst):
    k = kael.tensor([0.0, 1.5, -2.0]).to(dst)
    check(k, torch.tensor([0.0, 1.5, -2.0]).to(tdtype(dst)))


def test_to_returns_independent_tensor_for_other_dtype():
    k = kael.tensor([1.0, 2.0])
    k2 = k.to(kael.float64)
    k2.add_(1)
    assert k.tolist() == [1.0, 2.0]


def test_to_same_dtype_keeps_values():
    k = kael.tensor([1.0, 2.0])
    r = k.to(kael.float32)
    assert r.dtype is kael.float32 and r.tolist() == [1.0, 2.0]


# ------------------------------------------------------------------- repr ---
@pytest.mark.parametrize("make", [
    lambda: kael.tensor([1.0, 2.0]), lambda: kael.tensor(3), lambda: kael.zeros(0),
    lambda: kael.ones(2, 3, dtype=kael.bool), lambda: kael.arange(6).reshape(2, 3).T,
    lambda: kael.zeros(2, dtype=kael.float64),
], ids=["f32", "0d_int", "empty", "bool", "noncontig", "f64"])
def test_repr_starts_with_tensor(make):
    r = repr(make())
    assert isinstance(r, str)
    assert r.startswith("tensor(")


def test_repr_of_large_tensor_is_reasonable():
    r = repr(kael.zeros(1000, 1000))
    assert r.startswith("tensor(")
    assert len(r) < 100000


# ----------------------------------------------------------------- bool() ---
def test_bool_of_single_element_tensor():
    assert bool(kael.tensor(1.0)) is True
    assert bool(kael.tensor([0])) is False
    assert bool(kael.ones(1, 1)) is True
    assert bool(kael.tensor([False])) is False


# --------------------------------------------------------- clone / detach ---
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_clone_and_detach_keep_dtype_values(dtype):
    compare(lambda lib, x: x.clone(), ((3, 4), dtype, "T"))
    compare(lambda lib, x: x.detach(), ((3, 4), dtype))
    compare(lambda lib, x: x.contiguous(), ((3, 4), dtype, "step"))


def test_contiguous_result_strides():
    p = make_pair((3, 4), "float32", "T")
    c = p.k.contiguous()
    assert c.is_contiguous() and c.stride() == tuple(p.t.contiguous().stride())
    check(c, p.t.contiguous())


# --------------------------------------------------------------- threads ---
def test_set_and_get_num_threads():
    orig = kael.get_num_threads()
    assert type(orig) is int and orig >= 1
    try:
        kael.set_num_threads(1)
        assert kael.get_num_threads() == 1
        p = make_pair((300, 200), "float32")
        q = make_pair((200, 50), "float32")
        r1 = p.k @ q.k
        s1 = p.k.sum(dim=0)
        e1 = kael.exp(p.k)
        kael.set_num_threads(2)
        assert kael.get_num_threads() == 2
        r2 = p.k @ q.k
        s2 = p.k.sum(dim=0)
        e2 = kael.exp(p.k)
        tr = p.t @ q.t
        check(r1, tr, rtol=1e-5, atol=1e-4)
        check(r2, tr, rtol=1e-5, atol=1e-4)
        check(s1, p.t.sum(dim=0), rtol=1e-5, atol=1e-4)
        check(s2, p.t.sum(dim=0), rtol=1e-5, atol=1e-4)
        check(e1, torch.exp(p.t))
        check(e2, torch.exp(p.t))
    finally:
        kael.set_num_threads(orig)
    assert kael.get_num_threads() == orig


@pytest.mark.parametrize("method, dtype", [("float", "float32"), ("double", "float64"), ("long", "int64"),
                                           ("bool", "bool")])
def test_dtype_conversion_methods_match_torch(method, dtype):
    data = [[1.5, -2.0, 0.0], [3.25, 0.5, -0.75]]
    k = getattr(kael.tensor(data), method)()
    t = getattr(torch.tensor(data), method)()
    assert k.dtype is getattr(kael, dtype)
    assert k.tolist() == t.tolist()
    same = kael.tensor(data, dtype=dtype)
    assert getattr(same, method)() is same  # no conversion: the same tensor


def test_is_tensor():
    assert kael.is_tensor(kael.ones(1)) and not kael.is_tensor([1.0]) and not kael.is_tensor(torch.ones(1))
