"""A warning raised by a call that then fails belongs to that call (Note [Warnings]): it is
issued with the failure, as PyTorch's warning handler does, and never surfaces with the next,
successful call."""
import warnings

import pytest
import torch

import kael


def warn_then_fail(lib):
    # tensor(tensor) warns about copy construction, then the device is not available (no CUDA
    # backend, or no device 99)
    lib.tensor(lib.ones(2), device="cuda:99")


def test_warning_of_a_failed_call_is_issued_with_it_not_later():
    for lib in (torch, kael):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises((RuntimeError, AssertionError)):
                warn_then_fail(lib)
            during = [str(w.message) for w in caught]
            lib.ones(1) + 1
            lib.zeros(2).sum()
            after = [str(w.message) for w in caught][len(during):]
        assert len(during) == 1 and "copy construct" in during[0], (lib.__name__, during)
        assert after == [], (lib.__name__, after)


def test_warning_filtered_into_an_error_does_not_fail_the_next_call():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeError, match="cuda"):
            warn_then_fail(kael)  # the call's own error wins over the warning turned error
        assert (kael.ones(1) + 1).tolist() == [2.0]
        assert kael.tensor([1.0, 2.0]).sum().item() == 3.0


def test_warnings_of_successful_calls_are_still_issued_once():
    x = kael.ones(2, 2, 2)
    with pytest.warns(UserWarning, match="x.T"):
        x.T
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kael.ones(1) + 1
    assert caught == []
