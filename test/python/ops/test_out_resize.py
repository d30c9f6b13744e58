"""An out= argument of the wrong shape is resized as PyTorch's resize_ does: contiguous strides
from its storage offset, in its own storage when (offset + numel) elements fit, otherwise the
storage grows in place with its contents kept, so every tensor sharing it sees the new memory
(Note [Growing a storage in place] in kael/core/storage.h). Each case runs on torch and kael and
compares what the user can see: the out tensor, the tensors sharing its storage, the offset of
out in the storage and whether the storage moved."""
import warnings

import numpy as np
import pytest
import torch

import kael


def offset(t, base):
    return (t.data_ptr() - base.data_ptr()) // t.element_size()


def observe(lib, make, n, value):
    """make(lib) -> (base, out); runs add(ones(n), value, out=out) and returns what is visible."""
    base, out = make(lib)
    before = base.data_ptr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = lib.add(lib.ones(n), value, out=out)
    assert result is out
    resized = [str(w.message) for w in caught if "resized" in str(w.message)]
    return {
        "out": out.tolist(), "shape": tuple(out.shape), "stride": out.stride(),
        "base": base.tolist(), "moved": base.data_ptr() != before,
        "offset": offset(out, base) if out.numel() else None,  # an empty tensor's data_ptr() is 0
        "warned": bool(resized),
    }


CASES = {
    # the case: a view whose storage holds the new size from its offset
    "view-prefix-fits": (lambda lib: (lambda b: (b, b[:2]))(lib.zeros(6)), 6),
    "slice-with-offset-fits": (lambda lib: (lambda b: (b, b[2:4]))(lib.zeros(6)), 3),
    "slice-with-offset-grows": (lambda lib: (lambda b: (b, b[2:4]))(lib.zeros(4)), 5),
    "shares-storage-grows": (lambda lib: (lambda b: (b, b.view(2, 2)))(lib.arange(4.0)), 8),
    "shares-storage-fits": (lambda lib: (lambda b: (b, b.view(2, 3)))(lib.arange(6.0)), 4),
    "shrinks": (lambda lib: (lambda b: (b, b))(lib.arange(4.0)), 2),
    "transposed-same-numel": (lambda lib: (lambda b: (b, b.T))(lib.zeros(3, 2)), 6),
    "empty-grows": (lambda lib: (lambda b: (b, b))(lib.zeros(0)), 3),
    "view-of-2d-row": (lambda lib: (lambda b: (b, b[1]))(lib.zeros(3, 4)), 7),
    "zero-elements-at-end": (lambda lib: (lambda b: (b, b[4:]))(lib.zeros(6)), 0),
}


@pytest.mark.parametrize("name", CASES)
def test_out_resize_matches_torch(name):
    make, n = CASES[name]
    expected = observe(torch, make, n, 1)
    got = observe(kael, make, n, 1)
    assert got == expected


def test_shrink_then_regrow_keeps_the_storage():
    for lib in (torch, kael):
        a = lib.arange(4.0)
        p = a.data_ptr()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.add(lib.ones(2), 1, out=a)
            assert a.tolist() == [2.0, 2.0] and a.data_ptr() == p
            lib.add(lib.ones(4), 5, out=a)
        assert a.tolist() == [6.0] * 4 and a.data_ptr() == p, lib.__name__


def test_growing_a_shared_storage_keeps_old_contents_for_every_view():
    # base, a view and the resized out share one storage: after the growth all three see the
    # new memory, with the old elements copied and out's elements written
    results = {}
    for lib in (torch, kael):
        base = lib.arange(4.0)
        head = base[:2]
        out = base[3:]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.add(lib.full((3,), 7.0), 1, out=out)
        head.add_(10)
        results[lib.__name__] = (base.tolist(), head.tolist(), out.tolist(),
                                 head.data_ptr() == base.data_ptr(), offset(out, base))
    assert results["kael"] == results["torch"]


def test_memory_kael_did_not_allocate_cannot_grow():
    arr = np.zeros(2, np.float32)
    x = kael.frombuffer(arr, dtype=kael.float32)
    with pytest.warns(UserWarning, match="resized"):  # as in PyTorch, the warning comes first
        with pytest.raises(RuntimeError, match="resize_: Trying to resize storage that is not resizable"):
            kael.add(kael.ones(5), 1, out=x)
    assert x.tolist() == [0.0, 0.0] and tuple(x.shape) == (2,)
    with pytest.warns(UserWarning, match="resized"):
        with pytest.raises(RuntimeError, match="Trying to resize storage that is not resizable"):
            torch.add(torch.ones(5), 1, out=torch.from_numpy(np.zeros(2, np.float32)))
    # fitting in the borrowed memory is fine, and writes it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kael.add(kael.ones(1), 1, out=x)
    assert arr.tolist() == [2.0, 0.0]


def test_growth_counts_as_a_write_of_the_shared_storage():
    base = kael.zeros(2)
    v = base[1:]
    before = base._version
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kael.add(kael.ones(3), 1, out=v)
    assert base._version == v._version > before
