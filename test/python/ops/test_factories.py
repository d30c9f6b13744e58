"""Factory functions: empty, zeros, ones, full, arange, eye, *_like."""
import pytest
import torch

import kael
from helpers import DTYPE_NAMES, check, compare, kdtype, tdtype


SIZE_FORMS = [
    ((2, 3), lambda f, lib, **kw: f(lib)(2, 3, **kw)),
    ((2, 3), lambda f, lib, **kw: f(lib)((2, 3), **kw)),
    ((2, 3), lambda f, lib, **kw: f(lib)([2, 3], **kw)),
    ((4,), lambda f, lib, **kw: f(lib)(4, **kw)),
    ((), lambda f, lib, **kw: f(lib)((), **kw)),
    ((0, 3), lambda f, lib, **kw: f(lib)(0, 3, **kw)),
    ((2, 1, 3, 1), lambda f, lib, **kw: f(lib)((2, 1, 3, 1), **kw)),
]
SIZE_IDS = ["varargs", "tuple", "list", "1d", "0d", "empty", "4d"]


@pytest.mark.parametrize("name", ["zeros", "ones"])
@pytest.mark.parametrize("shape,call", SIZE_FORMS, ids=SIZE_IDS)
def test_zeros_ones_size_forms(name, shape, call):
    k = call(lambda lib: getattr(lib, name), kael)
    t = call(lambda lib: getattr(lib, name), torch)
    check(k, t)
    assert k.dtype is kael.float32
    assert k.is_contiguous()
    assert k.stride() == tuple(t.stride())


@pytest.mark.parametrize("name", ["zeros", "ones"])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_zeros_ones_dtype(name, dtype):
    check(getattr(kael, name)(3, 2, dtype=kdtype(dtype)), getattr(torch, name)(3, 2, dtype=tdtype(dtype)))


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_dtype_given_as_string(dtype):
    check(kael.zeros(2, 2, dtype=dtype), torch.zeros(2, 2, dtype=tdtype(dtype)))
    check(kael.ones((3,), dtype=dtype), torch.ones(3, dtype=tdtype(dtype)))
    check(kael.full((2,), 1, dtype=dtype), torch.full((2,), 1, dtype=tdtype(dtype)))
    check(kael.arange(4, dtype=dtype if dtype != "bool" else "int64"),
          torch.arange(4, dtype=tdtype(dtype if dtype != "bool" else "int64")))


@pytest.mark.parametrize("name", ["zeros", "ones", "empty"])
def test_device_cpu_accepted(name):
    k = getattr(kael, name)(2, 3, device="cpu")
    assert k.device == "cpu" and str(k.device) == "cpu"
    assert type(k.device) is kael.device
    assert k.shape == (2, 3)


@pytest.mark.parametrize("shape,call", SIZE_FORMS, ids=SIZE_IDS)
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_empty_shape_dtype_stride(shape, call, dtype):
    k = call(lambda lib: lib.empty, kael, dtype=kdtype(dtype))
    t = call(lambda lib: lib.empty, torch, dtype=tdtype(dtype))
    assert k.shape == tuple(t.shape) == shape
    assert k.dtype is kdtype(dtype)
    assert k.stride() == tuple(t.stride())
    assert k.is_contiguous()
    assert k.numel() == t.numel()


@pytest.mark.parametrize("fill,dtype", [
    (3, None), (3.0, None), (True, None), (False, None), (-2.5, None),
    (3, "float64"), (2.5, "float64"), (7, "int64"), (1, "bool"), (0, "bool"),
    (2.0, "int64"), (-1.5, "float32"),
])
@pytest.mark.parametrize("size", [(2, 2), (3,), (), (0, 2)])
def test_full(fill, dtype, size):
    compare(lambda lib: lib.full(size, fill, **({} if dtype is None else {"dtype": getattr(lib, dtype)})))


def test_full_default_dtypes_follow_fill_value():
    assert kael.full((2, 2), 3).dtype is kael.int64
    assert kael.full((2, 2), 3.0).dtype is kael.float32
    assert kael.full((2, 2), True).dtype is kael.bool
    check(kael.full([2, 3], -4), torch.full([2, 3], -4))


@pytest.mark.parametrize("args,kwargs", [
    ((5,), {}),
    ((0,), {}),
    ((1, 7), {}),
    ((-3, 3), {}),
    ((0, 10, 3), {}),
    ((10, 0, -3), {}),
    ((0, 1, 0.25), {}),
    ((0, 1, 0.1), {}),
    ((1, 2.5, 0.5), {}),
    ((5.0,), {}),
    ((-1.5, 2.0), {}),
    ((2, 9, 2.5), {}),
    ((5,), {"dtype": "float64"}),
    ((5,), {"dtype": "float32"}),
    ((0, 1, 0.125), {"dtype": "float64"}),
    ((1, 4), {"dtype": "int64"}),
    ((0.5, 4.5), {"dtype": "int64"}),
])
def test_arange(args, kwargs):
    compare(lambda lib: lib.arange(*args, **{k: getattr(lib, v) for k, v in kwargs.items()}))


ARANGE_ARGS = [(3,), (0.5, 3.7), (0, 5, 1.5), (5, 0, -1.5), (-2.5, 2.5, 0.5), (0, 1, 0.1), (0, 1, 0.2), (2.9,),
               (0.5, 3.7, 1), (1, 4.0), (-1.5, 3), (0, 300), (0, -3, -1), (0, -5), (1.5,), (-3,), (0.5, 0.7),
               (0.7, 0.5, -1), (-0.5, 0.5, -1), (0, 1, 0), (0, 1e20, 1e18), (0, 2**40, 2**38), (0, 2**63),
               (0, float("inf")), (float("nan"), 3), (0, 9.3e18, 1e18), (1e-3, 2e-3, 1e-4), (255.5, -2.5, -0.5)]
ARANGE_DTYPES = ["int64", "int32", "int16", "int8", "uint8", "float64", "float32", "float16", "bfloat16", "bool", None]


@pytest.mark.parametrize("dtype", ARANGE_DTYPES)
@pytest.mark.parametrize("args", ARANGE_ARGS, ids=str)
def test_arange_follows_torch_for_every_dtype(args, dtype):
    """Length, values and errors as in PyTorch: int64 counts with truncated arguments, other
    dtypes take the length from the float arguments and wrap integral values; bool raises.
    (PyTorch raises NotImplementedError for bool, a RuntimeError; kael raises RuntimeError.)"""
    kw = {} if dtype is None else {"dtype": dtype}
    try:
        t = torch.arange(*args, **{k: getattr(torch, v) for k, v in kw.items()})
    except Exception as e:
        error = RuntimeError if isinstance(e, RuntimeError) else type(e)
        with pytest.raises(error):
            kael.arange(*args, **{k: getattr(kael, v) for k, v in kw.items()})
        return
    check(kael.arange(*args, **{k: getattr(kael, v) for k, v in kw.items()}), t)


def test_arange_examples_with_integral_dtypes():
    assert kael.arange(0.5, 3.7, dtype=kael.int64).tolist() == [0, 1, 2]
    assert kael.arange(0.5, 3.7, dtype=kael.int32).tolist() == [0, 1, 2, 3]
    assert kael.arange(0, 1, 0.2, dtype=kael.int32).tolist() == [0] * 5
    with pytest.raises(ValueError, match="arange: step must be nonzero"):
        kael.arange(0, 1, 0.2, dtype=kael.int64)
    with pytest.raises(RuntimeError, match="arange: not implemented for dtype bool"):
        kael.arange(3, dtype=kael.bool)


def test_arange_default_dtypes():
    assert kael.arange(5).dtype is kael.int64
    assert kael.arange(0, 1, 0.25).dtype is kael.float32
    assert kael.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert kael.arange(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]


@pytest.mark.parametrize("args", [(0,), (1,), (3,), (2, 3), (4, 2), (3, 0), (5, 5)])
@pytest.mark.parametrize("dtype", [None] + DTYPE_NAMES)
def test_eye(args, dtype):
    compare(lambda lib: lib.eye(*args, **({} if dtype is None else {"dtype": getattr(lib, dtype)})))


LIKE_SHAPES = [(2, 3), (), (0, 4), (2, 1, 3)]


@pytest.mark.parametrize("name", ["zeros_like", "ones_like"])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape", LIKE_SHAPES)
def test_zeros_ones_like(name, dtype, shape):
    compare(lambda lib, x: getattr(lib, name)(x), (shape, dtype))


@pytest.mark.parametrize("name", ["zeros_like", "ones_like"])
@pytest.mark.parametrize("src,dst", [("float32", "int64"), ("int64", "float64"), ("bool", "float32"), ("float64", "bool")])
def test_like_with_dtype_override(name, src, dst):
    compare(lambda lib, x: getattr(lib, name)(x, dtype=getattr(lib, dst)), ((2, 3), src))


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("fill", [2, 2.7, -1.5, True, 0])
def test_full_like(dtype, fill):
    # torch keeps the dtype of the input: full_like(int_tensor, 2.7) is int64 filled with 2
    compare(lambda lib, x: lib.full_like(x, fill), ((3, 2), dtype))


def test_full_like_dtype_override():
    compare(lambda lib, x: lib.full_like(x, 1.5, dtype=lib.float64), ((2, 2), "int64"))


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape", LIKE_SHAPES)
def test_empty_like(dtype, shape):
    t = torch.zeros(shape, dtype=tdtype(dtype))
    k = kael.zeros(shape, dtype=kdtype(dtype))
    ke, te = kael.empty_like(k), torch.empty_like(t)
    assert ke.shape == tuple(te.shape)
    assert ke.dtype is kdtype(dtype)
    assert ke.is_contiguous()
    assert ke.numel() == te.numel()
    if k.numel() > 0:
        assert ke.data_ptr() != k.data_ptr()


@pytest.mark.parametrize("name", ["zeros_like", "ones_like", "empty_like"])
def test_like_of_noncontiguous_input_has_same_shape(name):
    t = torch.arange(12.0).reshape(3, 4).T
    k = kael.arange(12.0).reshape(3, 4).T
    kr, tr = getattr(kael, name)(k), getattr(torch, name)(t)
    assert kr.shape == tuple(tr.shape) == (4, 3)
    if name != "empty_like":
        check(kr, tr)


def test_factories_return_fresh_memory():
    a, b = kael.zeros(16), kael.zeros(16)
    assert a.data_ptr() != b.data_ptr()
    a.add_(1)
    assert b.tolist() == [0.0] * 16


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_factory_dtype_keyword_sets_dtype(dtype):
    for k in (kael.zeros(2, dtype=kdtype(dtype)), kael.ones(2, dtype=kdtype(dtype)),
              kael.empty(2, dtype=kdtype(dtype)), kael.full((2,), 1, dtype=kdtype(dtype)),
              kael.eye(2, dtype=kdtype(dtype))):
        assert k.dtype is kdtype(dtype)
