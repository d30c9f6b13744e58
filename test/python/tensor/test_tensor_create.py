"""kael.tensor(data, dtype=None) construction rules."""

import numpy as np
import pytest
import torch

import kael
from helpers import BUFFER_NAMES, DTYPE_NAMES, check, compare, kdtype, tdtype


@pytest.mark.parametrize("data", [
    [1, 2, 3],
    [1.5, -2.0, 3.25],
    [True, False, True],
    [[1, 2], [3, 4], [5, 6]],
    [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],
    [[[1, 2]], [[3, 4]]],
    [[[True], [False]]],
    [1, 2.5],             # any float -> float32
    [[1, 2], [3, 4.0]],   # float deep inside
    [True, 2],            # bool + int -> int64
    [True, 2.5],          # bool + float -> float32
    [-(2 ** 63), 2 ** 63 - 1, 0],
    [2 ** 40, 1.5],
    [float("nan"), float("inf"), -float("inf"), -0.0],
    [[]],
    [[], []],
    [[[]]],
], ids=lambda d: repr(d)[:40])
def test_tensor_from_nested_lists(data):
    check(kael.tensor(data), torch.tensor(data))


@pytest.mark.parametrize("value", [3, -7, 0, 2.5, -0.0, True, False, 2 ** 62, float("inf")])
def test_tensor_from_python_scalar_is_0d(value):
    k = kael.tensor(value)
    check(k, torch.tensor(value))
    assert k.shape == ()
    assert k.ndim == 0


def test_empty_list_is_float32_of_shape_0():
    k = kael.tensor([])
    assert k.shape == (0,)
    assert k.dtype is kael.float32
    assert k.tolist() == []


def test_int_lists_keep_all_64_bits():
    big = [2 ** 63 - 1, -(2 ** 63), 2 ** 53 + 1, -(2 ** 53) - 1]
    k = kael.tensor(big)
    assert k.dtype is kael.int64
    assert k.tolist() == big
    assert kael.tensor(2 ** 63 - 1).item() == 2 ** 63 - 1


def test_default_dtype_rules():
    assert kael.tensor([1, 2]).dtype is kael.int64
    assert kael.tensor([1, 2.0]).dtype is kael.float32
    assert kael.tensor([True, False]).dtype is kael.bool
    assert kael.tensor(1.0).dtype is kael.float32
    assert kael.tensor(True).dtype is kael.bool


@pytest.mark.parametrize("data", [[1, 2, 3], [1.7, -1.7, 0.2], [True, False], [[0, 2], [-3, 0]], 5, 2.5, []],
                         ids=repr)
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_tensor_with_explicit_dtype(data, dtype):
    # float -> integer truncates toward zero, nonzero -> True for bool, out of range (-1.7 as
    # uint8, 300 as int8) raises, like torch
    compare(lambda lib: lib.tensor(data, dtype=getattr(lib, dtype)))


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_tensor_dtype_as_string(dtype):
    k = kael.tensor([0, 1, 2], dtype=dtype)
    check(k, torch.tensor([0, 1, 2], dtype=tdtype(dtype)))


def test_float64_values_round_through_float32_like_torch():
    data = [0.1, 1 / 3, 1e-40, 3.4e38, 1e39]
    check(kael.tensor(data), torch.tensor(data))
    check(kael.tensor(data, dtype=kael.float64), torch.tensor(data, dtype=torch.float64))


NP_ARRAYS = [
    ("float32_2d", lambda: np.arange(6, dtype=np.float32).reshape(2, 3) / 7),
    ("float64_2d", lambda: np.arange(6, dtype=np.float64).reshape(3, 2) / 7),
    ("int64_1d", lambda: np.array([1, -2, 2 ** 62], dtype=np.int64)),
    ("bool_2d", lambda: np.array([[True, False], [False, True]])),
    ("float32_0d", lambda: np.array(2.5, dtype=np.float32)),
    ("int64_0d", lambda: np.array(-4, dtype=np.int64)),
    ("float64_empty", lambda: np.zeros((0, 3), dtype=np.float64)),
    ("float32_3d", lambda: np.random.rand(2, 3, 4).astype(np.float32)),
    ("float32_transposed", lambda: np.arange(12, dtype=np.float32).reshape(3, 4).T),
    ("int64_strided", lambda: np.arange(20, dtype=np.int64)[::3]),
    ("float64_fortran", lambda: np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3))),
]


@pytest.mark.parametrize("make", [m for _, m in NP_ARRAYS], ids=[n for n, _ in NP_ARRAYS])
def test_tensor_from_numpy(make):
    arr = make()
    k = kael.tensor(arr)
    check(k, torch.tensor(arr))
    assert k.is_contiguous()


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_tensor_from_numpy_with_dtype(dtype):
    arr = np.array([[0.0, 1.5], [-2.5, 3.0]], dtype=np.float64)
    check(kael.tensor(arr, dtype=kdtype(dtype)), torch.tensor(arr, dtype=tdtype(dtype)))


def test_tensor_from_numpy_always_copies():
    arr = np.arange(6, dtype=np.float32)
    k = kael.tensor(arr)
    arr[0] = 100.0
    assert k.tolist()[0] == 0.0
    k.add_(1)
    assert arr[1] == 1.0
    assert k.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def test_tensor_from_list_copies_values_independently():
    data = [1.0, 2.0]
    k = kael.tensor(data)
    data[0] = 9.0
    assert k.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("data", [
    [[1, 2], [3]],
    [[1], [2, 3]],
    [[[1, 2], [3, 4]], [[5, 6]]],
    [[1, 2], 3],
    [1, [2, 3]],
    [[[1], [2]], [[3], [4, 5]]],
], ids=repr)
def test_ragged_lists_raise_value_error(data):
    with pytest.raises(ValueError, match="nested sequences have inconsistent sizes"):
        kael.tensor(data)
    with pytest.raises((ValueError, TypeError)):
        torch.tensor(data)


def _nest(depth):
    x = 1.0
    for _ in range(depth):
        x = [x]
    return x


@pytest.mark.parametrize("depth", [1, 5, 8, 33, 64])
def test_moderate_nesting_depth_works(depth):
    k = kael.tensor(_nest(depth))
    assert k.shape == (1,) * depth
    assert k.numel() == 1


@pytest.mark.parametrize("depth", [65, 100, 1000, 100000])
def test_nesting_deeper_than_64_raises_value_error(depth):
    with pytest.raises(ValueError, match="at most 64 dimensions"):
        kael.tensor(_nest(depth))


def test_self_referencing_list_raises_value_error():
    a = []
    a.append(a)
    with pytest.raises(ValueError):
        kael.tensor(a)
    b = [1.0, 2.0]
    c = [b, b]
    b.append(c)  # cycle through two levels, ragged as well
    with pytest.raises(ValueError):
        kael.tensor(c)


def test_shared_sublists_are_fine():
    row = [1, 2, 3]
    check(kael.tensor([row, row]), torch.tensor([row, row]))


def test_tensor_result_is_contiguous_with_torch_strides():
    k = kael.tensor([[1, 2, 3], [4, 5, 6]])
    assert k.stride() == (3, 1)
    assert k.is_contiguous()
    assert k.device == "cpu"


@pytest.mark.parametrize("dtype", BUFFER_NAMES)
def test_numpy_roundtrip_via_tolist(dtype):
    t = torch.arange(-3, 9).reshape(3, 4).to(tdtype(dtype))
    k = kael.tensor(t.numpy())
    check(k, t)
    assert k.tolist() == t.tolist()
