"""The Python protocols of kael.Tensor, under the names the bindings chapter gives them."""
import pytest
import torch

import kael


def test_scalars_mix_on_either_side():
    t = kael.tensor([1.0, 2.0, 4.0])
    tt = torch.tensor([1.0, 2.0, 4.0])
    for k, r in ((t + 1, tt + 1), (1 + t, 1 + tt), (t - 1, tt - 1), (1 - t, 1 - tt), (2 * t, 2 * tt),
                 (t * 2.5, tt * 2.5), (t / 2, tt / 2), (2 / t, 2 / tt), (t ** 2, tt ** 2), (2 ** t, 2 ** tt),
                 (kael.add(1, t), tt + 1)):
        assert k.tolist() == r.tolist() and k.dtype is kael.float32
    b = kael.tensor([True, False])
    assert (b + True).dtype is kael.bool  # bool is checked before int: True stays a bool scalar
    assert (b + 1).dtype is kael.int64
    i = kael.tensor([1, 2])
    assert (i + True).dtype is kael.int64 and (i + 0.5).dtype is kael.float32


def test_foreign_operands_give_type_errors():
    t = kael.ones(2)
    for bad in ("x", [1, 2], object(), None, {1: 2}):
        with pytest.raises(TypeError):
            t + bad
        with pytest.raises(TypeError):
            bad - t
    with pytest.raises(TypeError):
        t @ 3
    assert (t == "x") is False and (t != "x") is True  # identity fallback, not an error


def test_views_share_memory():
    base = kael.arange(12).reshape(3, 4)
    for view in (base.view(4, 3), base.T, base[1], base[:, 1:3], base.narrow(1, 0, 2), base.unsqueeze(0),
                 base.flatten(), base.permute(1, 0), base.select(0, 2), base.expand(2, 3, 4)[0]):
        assert base.data_ptr() <= view.data_ptr() < base.data_ptr() + base.numel() * base.element_size()
    base.view(12)[5] = 100
    assert base[1, 1].item() == 100
    base.T[3, 0] = -1
    assert base[0, 3].item() == -1


def test_only_kael_errors_are_translated():
    class Weird:
        def __float__(self):
            raise FileNotFoundError("not ours")

    with pytest.raises(FileNotFoundError, match="not ours"):
        kael.ones(2) + Weird()


@pytest.mark.parametrize("value", [2.0 ** 62, 2.0 ** 63, -(2.0 ** 63), 3.4e38, 1e300, -2.5, float("inf"),
                                   -float("inf"), float("nan")])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_int_of_a_float_tensor_is_pythons_int_of_the_float_like_torch(value, dtype):
    # torch converts the value as Python's int(float) does: exact beyond int64 (no undefined
    # float -> int64 conversion), ValueError for NaN, OverflowError for an infinity
    try:
        want = int(torch.tensor(value, dtype=getattr(torch, dtype)))
    except (ValueError, OverflowError) as e:
        with pytest.raises(type(e)):
            int(kael.tensor(value, dtype=getattr(kael, dtype)))
        return
    got = int(kael.tensor(value, dtype=getattr(kael, dtype)))
    assert type(got) is int and got == want


def test_int_of_an_integer_tensor_keeps_every_bit():
    assert int(kael.tensor(2 ** 63 - 1)) == int(torch.tensor(2 ** 63 - 1)) == 2 ** 63 - 1


def test_number_protocols():
    assert float(kael.tensor([2.5])) == 2.5 and bool(kael.tensor([0.0])) is False
    assert [10, 20, 30][kael.tensor(1)] == 20  # __index__ on an int64 tensor
    with pytest.raises(TypeError):
        [1, 2][kael.tensor(1.0)]
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(kael.ones(2))
    with pytest.raises(TypeError):
        len(kael.tensor(1.0))
    with pytest.raises(TypeError):
        iter(kael.tensor(1.0))
    assert [x.item() for x in kael.tensor([3, 4])] == [3, 4] and len(kael.zeros(5, 2)) == 5
    assert -kael.tensor([1, -2]) is not None and abs(kael.tensor([-3])).item() == 3 and (+kael.ones(1)).item() == 1.0
