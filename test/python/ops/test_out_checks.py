"""out= and in-place calls check everything (dtype, device, overlap, shape, scalar arguments)
before they resize or write the destination: a failed call leaves it exactly as it was."""
import warnings

import pytest
import torch

import kael


def state(t):
    return tuple(t.shape), t.stride(), t.tolist(), t._version


def failed_call_leaves_out_alone(call, make_out, shape_error=False):
    """Runs call(lib, out) on torch and kael: both raise the same class and leave out untouched
    (a shape error: RuntimeError in both)."""
    outcomes = {}
    for lib in (torch, kael):
        out = make_out(lib)
        before = state(out)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(Exception) as info:
                call(lib, out)
        assert state(out) == before, lib.__name__
        assert not [w for w in caught if "resized" in str(w.message)], lib.__name__
        outcomes[lib.__name__] = info.type
    assert outcomes["kael"] is outcomes["torch"], outcomes
    if shape_error:
        assert outcomes["kael"] is RuntimeError, outcomes


@pytest.mark.parametrize("make_out", [
    lambda lib: lib.arange(5),
    lambda lib: lib.arange(6).reshape(2, 3),
    lambda lib: lib.arange(0),
    lambda lib: lib.arange(6).reshape(3, 2).T,
], ids=["other-shape", "same-shape", "empty", "transposed"])
def test_result_dtype_that_cannot_be_cast_leaves_out_alone(make_out):
    # a float result does not fit an int64 out; the resize must not happen before the dtype check
    failed_call_leaves_out_alone(lambda lib, out: lib.add(lib.ones(2, 3), 1.5, out=out), make_out)


@pytest.mark.parametrize("op", ["neg", "exp", "sqrt", "abs"])
def test_unary_out_that_cannot_take_the_result_is_untouched(op):
    make = {"neg": lambda lib: lib.zeros(4, dtype=lib.bool),   # neg of bool is not defined / can't cast
            "exp": lambda lib: lib.zeros(7, dtype=lib.int64),  # float result into int64
            "sqrt": lambda lib: lib.zeros(1, dtype=lib.bool),
            "abs": lambda lib: lib.zeros(2, 2, dtype=lib.bool)}[op]
    failed_call_leaves_out_alone(lambda lib, out: getattr(lib, op)(lib.arange(1, 4, dtype=lib.float32), out=out), make)


def test_partially_overlapping_out_is_untouched():
    failed_call_leaves_out_alone(lambda lib, out: lib.mul(out[:3], 2, out=out[1:]), lambda lib: lib.arange(6.0))


def test_expanded_out_that_would_be_resized_is_untouched():
    failed_call_leaves_out_alone(lambda lib, out: lib.add(lib.ones(5), 1, out=out),
                                 lambda lib: lib.zeros(1).expand(3))


def test_out_that_is_also_an_input_is_not_resized():
    # PyTorch does not resize an out that is one of the inputs; both raise RuntimeError
    for lib, error in ((torch, RuntimeError), (kael, RuntimeError)):
        a = lib.tensor([1.0, 2.0, 3.0])
        before = state(a)
        with pytest.raises(error, match="doesn't match the broadcast shape"):
            lib.add(a, lib.ones(2, 3), out=a)
        assert state(a) == before


def test_inplace_call_that_fails_a_check_is_untouched():
    failed_call_leaves_out_alone(lambda lib, out: out.add_(1.5), lambda lib: lib.arange(4))
    failed_call_leaves_out_alone(lambda lib, out: out.mul_(lib.ones(4)), lambda lib: lib.arange(4))
    failed_call_leaves_out_alone(lambda lib, out: out.add_(lib.ones(2, 4, dtype=lib.int64)),
                                 lambda lib: lib.arange(4), shape_error=True)


def test_successful_out_call_resizes_warns_and_bumps_version():
    for lib in (torch, kael):
        out = lib.zeros(4)
        with pytest.warns(UserWarning, match="resized"):
            lib.add(lib.ones(2, 3), 1.0, out=out)
        assert tuple(out.shape) == (2, 3) and out.tolist() == [[2.0] * 3] * 2
        version = out._version
        lib.add(lib.ones(2, 3), 2.0, out=out)
        assert out._version > version and out.tolist() == [[3.0] * 3] * 2


def test_out_of_another_dtype_gets_the_converted_result():
    k = kael.zeros(2, 3, dtype=kael.float64)
    t = torch.zeros(2, 3, dtype=torch.float64)
    kael.add(kael.ones(2, 3), 0.1, out=k)
    torch.add(torch.ones(2, 3), 0.1, out=t)
    assert k.tolist() == t.tolist()


def test_noncontiguous_out_of_the_right_shape_is_written_in_place():
    k = kael.zeros(3, 2).T
    t = torch.zeros(3, 2).T
    kael.add(kael.ones(2, 3), kael.arange(3.0), out=k)
    torch.add(torch.ones(2, 3), torch.arange(3.0), out=t)
    assert k.tolist() == t.tolist() and k.stride() == t.stride() == (1, 2)
