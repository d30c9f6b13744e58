"""Bad input gets a Python exception, never a crash: sizes that overflow, memory that cannot
be had, writes that would alias, objects of the wrong kind."""
import pytest
import torch

import kael

ERRORS = (RuntimeError, ValueError, TypeError, IndexError, MemoryError)


@pytest.mark.parametrize("make", [
    lambda: kael.zeros(2 ** 40, 2 ** 40),
    lambda: kael.empty(2 ** 62),
    lambda: kael.eye(2 ** 40),
    lambda: kael.ones(3).view(2 ** 62, 4, -1),
    lambda: kael.ones(1).expand(2 ** 40, 2 ** 40),
    lambda: kael.arange(0, 1e300, 1e-300),
    lambda: kael.full((2,), 2 ** 70),
], ids=["zeros", "empty", "eye", "view", "expand", "arange", "full-overflow"])
def test_impossible_sizes_raise(make):
    with pytest.raises(ERRORS):
        make()


def test_allocation_failure_is_memory_error():
    # the message says what was asked, as torch's RuntimeError does (it was an empty MemoryError)
    with pytest.raises(MemoryError, match=r"^CPU allocator: can't allocate memory: you tried to allocate "
                                          r"140737488355328 bytes \(134217728 MiB\)$"):
        kael.empty(2 ** 45)  # 128 TiB of float32
    with pytest.raises(RuntimeError, match="can't allocate memory: you tried to allocate 140737488355328 bytes"):
        torch.empty(2 ** 45)


def test_in_place_write_into_expanded_tensor_raises_like_torch():
    with pytest.raises(RuntimeError):
        torch.zeros(1, 3).expand(4, 3).add_(1)
    x = kael.zeros(1, 3).expand(4, 3)
    with pytest.raises(RuntimeError, match="more than one element"):
        x.add_(1)
    with pytest.raises(RuntimeError, match="more than one element"):
        x[:] = 2.0
    x[0] = 2.0  # one row of the expanded view does not alias itself
    assert x.tolist() == [[2.0] * 3] * 4


@pytest.mark.parametrize("call", [
    lambda: kael.tensor(object()),
    lambda: kael.tensor([1, "a"]),
    lambda: kael.add(None, None),
    lambda: kael.ones(2).view(None),
    lambda: kael.ones(2)[{}],
    lambda: kael.ones(2).sum(dim=1.5),
    lambda: kael.zeros((2, "3")),
    lambda: kael.ones(2).to(3.5),
], ids=["object", "str-element", "none-args", "view-none", "dict-key", "float-dim", "str-size", "to-float"])
def test_objects_of_the_wrong_kind_raise(call):
    with pytest.raises(ERRORS):
        call()


def test_many_dims_work_without_crashing():
    shape = (1,) * 30 + (2,)
    x = kael.ones(*shape)
    assert (x + x).sum().item() == 4.0
    assert x.permute(*reversed(range(31))).shape == tuple(reversed(shape))
    a = kael.ones(*(1,) * 13, 2, 3)
    b = kael.ones(3, 2)
    assert (a @ b).shape == (1,) * 13 + (2, 2)  # more batch dims than oneDNN takes


def test_matmul_and_views_on_empty_tensors():
    check = kael.zeros(0, 3) @ kael.zeros(3, 4)
    assert check.shape == (0, 4)
    assert (kael.zeros(2, 0) @ kael.zeros(0, 3)).tolist() == [[0.0] * 3] * 2
    assert kael.zeros(0, 5).sum(dim=0).tolist() == [0.0] * 5
