"""repr(tensor) reads exactly like PyTorch's (with kael. for torch.); see Note [Tensor repr]."""
import math

import pytest
import torch

import kael

CASES = [
    [1.0, 2.0], [1.5, -2.25], [[1, 2], [3, 4]], [True, False], [1e10, 1.0], [0.0001, 1.0], [1e-5, 3.0],
    3.5, 7, True, [], [[1.5, 2], [3, 4]], [math.nan, 1.0, math.inf], [123456.0, 1.5], [1.0, 2000.0],
    [0.0, 0.0], [-0.5, 0.25, 1e-3], [[[1.0, -1.0]], [[2.5, 3.0]]], list(range(2000)), [-(2 ** 63), 2 ** 63 - 1],
    [[0.1 * i + j for i in range(30)] for j in range(3)], [[float(i * j) for i in range(40)] for j in range(40)],
]


@pytest.mark.parametrize("data", CASES, ids=lambda c: str(c)[:30])
@pytest.mark.parametrize("dtype", [None, "float64", "int64", "bool"])
def test_repr_matches_torch(data, dtype):
    try:
        expected = repr(torch.tensor(data, dtype=getattr(torch, dtype) if dtype else None))
    except RuntimeError:  # e.g. nan as int64: kael refuses it too
        with pytest.raises(RuntimeError, match="cannot be converted"):
            kael.tensor(data, dtype=dtype)
        return
    got = repr(kael.tensor(data, dtype=dtype))
    assert got == expected.replace("torch.", "kael.")


def test_repr_of_empty_and_views():
    assert repr(kael.zeros(0, 3)) == repr(torch.zeros(0, 3))
    assert repr(kael.zeros(0, dtype=kael.int64)) == repr(torch.zeros(0, dtype=torch.int64)).replace("torch.", "kael.")
    k = kael.arange(24).reshape(2, 3, 4).permute(2, 0, 1)[:, :, ::2]
    t = torch.arange(24).reshape(2, 3, 4).permute(2, 0, 1)[:, :, ::2]
    assert repr(k) == repr(t)
    big = kael.arange(4000.0).reshape(40, 100)
    assert repr(big) == repr(torch.arange(4000.0).reshape(40, 100))
