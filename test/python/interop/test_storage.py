"""Storage over memory kael borrows: kael.frombuffer shares a buffer-protocol object's
bytes, keeps the object alive while any view lives, and releases it (under the GIL) from
whichever thread drops the last view."""
import gc
import subprocess
import sys
import textwrap
import threading
import warnings

import numpy as np
import pytest
import torch

import kael
from helpers import check

DTYPES = ["float32", "float64", "int64"]


def both(buf_factory, dtype, **kw):
    t = torch.frombuffer(buf_factory(), dtype=getattr(torch, dtype), **kw)
    k = kael.frombuffer(buf_factory(), dtype=getattr(kael, dtype), **kw)
    return k, t


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", [{}, {"count": 3}, {"offset": 8}, {"count": 2, "offset": 16}, {"count": -1, "offset": 8}])
def test_frombuffer_matches_torch(dtype, kw):
    data = np.arange(6, dtype=dtype).tobytes()
    k, t = both(lambda: bytearray(data), dtype, **kw)
    check(k, t)


def test_frombuffer_shares_memory_both_ways():
    arr = np.arange(6, dtype=np.float32)
    t = kael.frombuffer(arr, dtype=kael.float32)
    t.mul_(10)
    assert arr.tolist() == [0, 10, 20, 30, 40, 50]
    arr[2] = -1
    assert t.tolist() == [0, 10, -1, 30, 40, 50]
    v = t[1:4]
    v.mul_(0).add_(7)
    assert arr.tolist()[1:4] == [7, 7, 7]
    b = bytearray(16)
    k = kael.frombuffer(b, dtype=kael.int64, offset=8)
    k.add_(0x0102)
    assert b[8:10] == b"\x02\x01" and b[:8] == bytes(8)


@pytest.mark.parametrize("buf,kw", [
    (bytearray(0), {}),
    (bytearray(8), {"count": 0}),
    (bytearray(7), {}),
    (bytearray(8), {"offset": 8}),
    (bytearray(8), {"offset": -1}),
    (bytearray(8), {"count": 3}),
    (bytearray(12), {"count": 2, "offset": 8}),
    ([1.0, 2.0], {}),
])
def test_frombuffer_errors_match_torch(buf, kw):
    with pytest.raises(Exception) as te:
        torch.frombuffer(buf, dtype=torch.float32, **kw)
    with pytest.raises(type(te.value)) as ke:
        kael.frombuffer(buf, dtype=kael.float32, **kw)
    msg = str(ke.value)
    assert "frombuffer: " in msg
    # kael's message is torch's, after the op name.
    assert str(te.value).split(" (got")[0].rstrip(".") in msg, (msg, str(te.value))


def test_frombuffer_argument_errors():
    with pytest.raises(TypeError, match="dtype"):
        kael.frombuffer(bytearray(8))
    with pytest.raises(TypeError, match="frombuffer: dtype must be a kael.dtype, got int"):
        kael.frombuffer(bytearray(8), dtype=3)
    with pytest.raises(TypeError):
        kael.frombuffer(bytearray(8), kael.float32)  # dtype is keyword-only, as in torch


def test_frombuffer_rejects_misaligned_data_instead_of_loading_it_unaligned():
    # torch accepts any address; kael's kernels load elements with aligned accesses.
    assert torch.frombuffer(bytearray(8), dtype=torch.float32, count=1, offset=1).shape == (1,)
    with pytest.raises(ValueError, match=r"frombuffer: the data at offset 1 is not aligned to the element size \(4 "):
        kael.frombuffer(bytearray(8), dtype=kael.float32, count=1, offset=1)


def test_frombuffer_bool_takes_any_byte_as_torch():
    # borrowed memory is not normalised; a byte other than 0 is true (Note [Bool bytes])
    data = [1, 0, 0, 1, 2, 255, 128]
    k = kael.frombuffer(bytearray(data), dtype=kael.bool, offset=1)
    t = torch.frombuffer(bytearray(data), dtype=torch.bool, offset=1)
    check(k, t)
    assert k.sum().item() == t.sum().item() == 4
    assert (k == True).tolist() == (t == True).tolist()  # noqa: E712
    assert k.view(kael.uint8).tolist() == data[1:]


def test_frombuffer_of_a_readonly_buffer_warns_like_torch():
    data = np.arange(4, dtype=np.float32).tobytes()
    with pytest.warns(UserWarning, match="not writable"):
        torch.frombuffer(data, dtype=torch.float32)
    with pytest.warns(UserWarning, match="frombuffer: the given buffer is not writable"):
        k = kael.frombuffer(data, dtype=kael.float32)
    assert k.tolist() == [0, 1, 2, 3]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning):
            kael.frombuffer(data, dtype=kael.float32)


def test_owner_is_held_while_any_view_lives_and_released_after():
    b = bytearray(np.arange(8, dtype=np.float32).tobytes())
    base = sys.getrefcount(b)
    t = kael.frombuffer(b, dtype=kael.float32)
    assert sys.getrefcount(b) == base + 1
    with pytest.raises(BufferError):
        b.extend(b"x")  # exported: cannot be resized under the tensor
    v = t[2:5]
    w = v.view(3, 1)
    del t
    gc.collect()
    assert sys.getrefcount(b) == base + 1
    del v
    gc.collect()
    assert sys.getrefcount(b) == base + 1
    assert w.sum().item() == 2 + 3 + 4
    del w
    gc.collect()
    assert sys.getrefcount(b) == base
    b.extend(b"x")


def test_results_of_ops_do_not_hold_the_owner():
    b = bytearray(np.ones(4, dtype=np.float32).tobytes())
    base = sys.getrefcount(b)
    t = kael.frombuffer(b, dtype=kael.float32)
    r = (t + 1, t.sum(), t.clone(), t.to(kael.float64))
    del t
    gc.collect()
    assert sys.getrefcount(b) == base
    assert r[0].tolist() == [2.0] * 4 and r[1].item() == 4.0


class Tracked(np.ndarray):
    """An owner whose release runs Python code: releasing it without the GIL would crash."""
    released = []

    def __del__(self):
        Tracked.released.append(threading.get_ident())


@pytest.mark.parametrize("on_new_thread", [True, False], ids=["native-thread", "gil-released"])
def test_owner_released_from_cpp_without_the_gil(on_new_thread):
    Tracked.released.clear()
    arr = np.arange(4, dtype=np.float64).view(Tracked)
    t = kael.frombuffer(arr, dtype=kael.float64)
    ref = kael._C._native_ref(t[1:])  # a C++ reference to a view: the only one left below
    del t, arr
    gc.collect()
    assert Tracked.released == []
    kael._C._drop_native_ref(ref, on_new_thread)
    gc.collect()
    assert len(Tracked.released) == 1
    if on_new_thread:
        assert Tracked.released[0] != threading.get_ident()
    with pytest.raises(ValueError, match="already dropped"):
        kael._C._drop_native_ref(ref, on_new_thread)


def test_owners_released_concurrently_from_many_threads():
    Tracked.released.clear()
    refs = []
    for i in range(64):
        t = kael.frombuffer(np.full(8, i, dtype=np.int64).view(Tracked), dtype=kael.int64)
        refs.append(kael._C._native_ref(t))
        del t
    gc.collect()
    assert Tracked.released == []

    def drop(part):
        for r in part:
            kael._C._drop_native_ref(r, True)

    threads = [threading.Thread(target=drop, args=(refs[i::4],)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    gc.collect()
    assert len(Tracked.released) == 64


def test_tensors_alive_at_interpreter_exit_do_not_crash():
    code = textwrap.dedent("""
        import numpy as np, kael
        keep = kael.frombuffer(bytearray(64), dtype=kael.float32)
        arr = np.zeros(4)
        held = kael._C._native_ref(kael.frombuffer(arr, dtype=kael.float64))
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_borrowed_memory_is_not_counted_by_the_allocator():
    gc.collect()
    before = kael.allocator_stats()
    b = bytearray(1 << 20)
    t = kael.frombuffer(b, dtype=kael.float32)
    during = kael.allocator_stats()
    assert during["in_use_bytes"] == before["in_use_bytes"]
    assert during["misses"] == before["misses"] and during["hits"] == before["hits"]
    del t
    gc.collect()
    assert kael.allocator_stats()["in_use_bytes"] == before["in_use_bytes"]
