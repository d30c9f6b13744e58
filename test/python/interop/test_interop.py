"""NumPy and DLPack interop: from_numpy's table of dtypes, strides, alignment and read-only
arrays, numpy() and __array__, __dlpack__/__dlpack_device__, from_dlpack from torch and NumPy,
and the chapter's lifetime tests (delete one side, empty the cache, allocate again, the other
side still reads its values)."""
import gc

import numpy as np
import pytest
import torch

import kael


# ------------------------------------------------------------------ from_numpy


@pytest.mark.parametrize("np_dtype,kael_dtype", [
    (np.float32, kael.float32), (np.float64, kael.float64), (np.float16, kael.float16), (np.int64, kael.int64),
    (np.int32, kael.int32), (np.int16, kael.int16), (np.int8, kael.int8), (np.uint8, kael.uint8),
    (np.bool_, kael.bool),
])
def test_from_numpy_maps_dtypes_and_shares_memory(np_dtype, kael_dtype):
    a = (np.arange(6) % 2).astype(np_dtype).reshape(2, 3)
    t = kael.from_numpy(a)
    expected = torch.from_numpy(a)
    assert t.dtype == kael_dtype and str(t.dtype)[5:] == str(expected.dtype)[6:]
    assert t.tolist() == expected.tolist()
    assert t.data_ptr() == a.ctypes.data


@pytest.mark.parametrize("np_dtype", [np.complex64, np.uint16, np.float128 if hasattr(np, "float128") else np.longdouble,
                                      np.dtype([("a", np.int32)])])
def test_from_numpy_rejects_other_dtypes_naming_them(np_dtype):
    a = np.zeros(3, dtype=np_dtype)
    with pytest.raises(TypeError, match="can't convert np.ndarray of type"):
        kael.from_numpy(a)


def test_from_numpy_rejects_what_kael_cannot_view():
    with pytest.raises(TypeError, match="expected np.ndarray"):
        kael.from_numpy([1, 2])
    with pytest.raises(TypeError, match="byte order"):
        kael.from_numpy(np.arange(3, dtype=">f4"))
    with pytest.raises(ValueError, match="copy"):
        kael.from_numpy(np.arange(5.0)[::-1])
    with pytest.raises(ValueError):
        torch.from_numpy(np.arange(5.0)[::-1])
    raw = np.zeros(4 * 8 + 1, dtype=np.uint8)
    with pytest.raises(RuntimeError, match="aligned"):
        kael.from_numpy(raw[1:].view(np.float64))
    structured = np.zeros(4, dtype=[("a", np.int16), ("b", np.int32)])
    with pytest.raises(ValueError, match="multiple of the element"):
        kael.from_numpy(structured["b"])


def test_from_numpy_strided_views_as_the_chapter_traces_them():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = kael.from_numpy(a.T)
    assert t.shape == (3, 2) and t.stride() == (1, 3) and t.tolist() == a.T.tolist()
    s = kael.from_numpy(a[:, ::2])
    assert s.stride() == (3, 2) and s.tolist() == [[0.0, 2.0], [3.0, 5.0]]
    empty = kael.from_numpy(np.zeros((0, 3)))
    assert empty.shape == (0, 3)


def test_from_numpy_aliases_both_ways():
    a = np.zeros(3)
    t = kael.from_numpy(a)
    a[0] = 99
    t.add_(1)
    assert t.tolist() == [100.0, 1.0, 1.0] and a.tolist() == [100.0, 1.0, 1.0]


def test_from_numpy_copies_read_only_arrays():
    a = np.arange(3.0)
    a.flags.writeable = False
    t = kael.from_numpy(a)
    assert t.data_ptr() != a.ctypes.data
    t.add_(1)
    assert a.tolist() == [0.0, 1.0, 2.0]


def test_tensor_of_an_array_copies():
    a = np.arange(3, dtype=np.int32)
    t = kael.tensor(a)
    assert t.data_ptr() != a.ctypes.data and t.dtype == kael.int32


# ------------------------------------------------------------------ numpy(), __array__


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32",
                                   "float64"])
def test_numpy_shares_memory_for_every_dtype(dtype):
    t = kael.zeros(2, 3, dtype=getattr(kael, dtype))
    a = t.numpy()
    assert a.dtype == torch.zeros(1, dtype=getattr(torch, dtype)).numpy().dtype
    assert a.ctypes.data == t.data_ptr() and a.shape == (2, 3)
    t.fill_(1)
    assert a.tolist() == torch.ones(2, 3, dtype=getattr(torch, dtype)).numpy().tolist()


def test_numpy_of_views_is_strided():
    t = kael.arange(12.0).reshape(3, 4)
    assert t.T.numpy().tolist() == np.arange(12.0).reshape(3, 4).T.tolist()
    assert t[:, ::2].numpy().strides == (16, 8)
    assert t[1:, 1].numpy().tolist() == [5.0, 9.0]


def test_numpy_refusals():
    class RequiresGrad(kael.Tensor):  # stands for a tensor that requires grad (autograd sets the flag)
        requires_grad = True

    g = RequiresGrad(kael.ones(2))
    with pytest.raises(RuntimeError, match="requires grad; call .detach"):
        g.numpy()
    with pytest.raises(RuntimeError):
        torch.ones(2, requires_grad=True).numpy()
    assert g.numpy(force=True).tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="NumPy has no"):
        kael.zeros(2, dtype=kael.bfloat16).numpy()
    assert kael.zeros(2, dtype=kael.bfloat16).float().numpy().tolist() == [0.0, 0.0]


def test_array_protocol():
    t = kael.arange(4.0)
    assert np.shares_memory(np.asarray(t), t.numpy())
    assert np.asarray(t).ctypes.data == t.data_ptr()
    copied = np.array(t, copy=True)
    assert copied.ctypes.data != t.data_ptr() and copied.tolist() == [0.0, 1.0, 2.0, 3.0]
    as_int = np.asarray(t, dtype=np.int64)
    assert as_int.dtype == np.int64 and as_int.tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        np.array(t, dtype=np.int64, copy=False)
    # ufuncs leave tensors alone (__array_ufunc__ = None); they take the shared array
    with pytest.raises(TypeError):
        np.exp(kael.zeros(2))
    assert np.exp(kael.zeros(2).numpy()).tolist() == [1.0, 1.0]
    for value in (np.complex128(1 + 2j), np.float64(2.0), np.int64(2)):
        result = value + kael.ones(2) if not isinstance(value, np.complexfloating) else None
        if result is None:
            with pytest.raises(TypeError):
                kael.ones(2) + value
            with pytest.raises(TypeError):
                value + kael.ones(2)
        else:
            assert isinstance(result, kael.Tensor) and result.tolist() == [3.0, 3.0]


def test_round_trip_through_numpy_needs_no_copy():
    t = kael.arange(5.0)
    assert kael.from_numpy(t.numpy()).data_ptr() == t.data_ptr()


# ------------------------------------------------------------------ lifetimes


def _churn():
    gc.collect()
    kael.empty_cache()
    return kael.zeros(1 << 12)


def test_from_numpy_keeps_the_array_alive():
    a = np.arange(1 << 12, dtype=np.float32)
    t = kael.from_numpy(a)
    del a
    _churn()
    np.arange(1 << 12, dtype=np.float32) * 0
    assert t[5].item() == 5.0 and t[-1].item() == (1 << 12) - 1


def test_view_of_from_numpy_keeps_the_array_alive():
    a = np.arange(1 << 12, dtype=np.float64)
    view = kael.from_numpy(a)[10:20]
    del a
    _churn()
    assert view.tolist() == [float(i) for i in range(10, 20)]


def test_numpy_keeps_the_tensor_memory_alive():
    t = kael.arange(1 << 12, dtype=kael.float32)
    a = t.numpy()
    del t
    fresh = _churn()
    assert fresh.sum().item() == 0.0
    assert a[7] == 7.0 and a[-1] == (1 << 12) - 1


def test_numpy_of_view_keeps_memory_alive():
    t = kael.arange(1 << 12, dtype=kael.float64)
    a = t[100:110].numpy()
    del t
    _churn()
    assert a.tolist() == [float(i) for i in range(100, 110)]


def test_numpy_view_survives_moving_the_tensor():
    t = kael.arange(4.0)
    a = t.numpy()
    t.data = kael.zeros(4)
    _churn()
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_array_owner_release_after_the_gil_was_released():
    a = np.arange(8.0)
    t = kael.from_numpy(a)
    ref = kael._C._native_ref(t)
    del t, a
    kael._C._drop_native_ref(ref, True)  # the last owner dies on a thread Python never saw
    _churn()


# ------------------------------------------------------------------ DLPack


def test_dlpack_device_and_protocol_keywords():
    t = kael.arange(4.0)
    assert t.__dlpack_device__() == (1, 0) == tuple(torch.arange(4.0).__dlpack_device__())
    capsule = t.__dlpack__(stream=None, max_version=(1, 0), dl_device=(1, 0), copy=False)
    assert type(capsule).__name__ == "PyCapsule"
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(2, 0))


def test_dlpack_with_torch_shares_memory():
    t = kael.arange(6.0).reshape(2, 3)
    theirs = torch.from_dlpack(t)
    assert theirs.data_ptr() == t.data_ptr() and theirs.tolist() == t.tolist()
    theirs.add_(1)
    assert t[0, 0].item() == 1.0
    strided = torch.from_dlpack(t.T)
    assert strided.tolist() == t.T.tolist()


def test_dlpack_keeps_memory_alive():
    t = kael.arange(1 << 12, dtype=kael.float32)
    theirs = torch.from_dlpack(t)
    del t
    _churn()
    assert theirs[9].item() == 9.0


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "uint8", "bool", "float16"])
def test_from_dlpack_of_torch_is_zero_copy(dtype):
    theirs = torch.arange(6).to(getattr(torch, dtype)).reshape(2, 3)
    ours = kael.from_dlpack(theirs)
    assert ours.data_ptr() == theirs.data_ptr()
    assert ours.tolist() == theirs.tolist() and str(ours.dtype)[5:] == dtype
    theirs.zero_()
    assert ours.sum().item() == 0


def test_from_dlpack_of_numpy_views_and_capsules():
    a = np.arange(12.0).reshape(3, 4)
    ours = kael.from_dlpack(a[:, 1:])
    assert ours.tolist() == a[:, 1:].tolist() and ours.data_ptr() == a[:, 1:].ctypes.data
    from torch.utils.dlpack import to_dlpack
    theirs = torch.arange(3.0)
    assert kael.from_dlpack(to_dlpack(theirs)).data_ptr() == theirs.data_ptr()
    with pytest.raises(TypeError):
        kael.from_dlpack([1, 2])


def test_from_dlpack_keeps_the_producer_alive():
    theirs = torch.arange(1 << 12, dtype=torch.float32)
    ours = kael.from_dlpack(theirs)
    del theirs
    gc.collect()
    torch.zeros(1 << 12)
    _churn()
    assert ours[11].item() == 11.0
