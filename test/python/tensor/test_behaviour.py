"""Behaviour that values cannot show: identity, lifetimes, weak references, GIL release."""
import gc
import threading
import weakref

import pytest

import kael
from helpers import compare
from kael.utils.weak import WeakIdKeyDictionary


def test_in_place_operators_keep_identity():
    x = kael.ones(3)
    alias = x
    x += 1
    x *= 2
    x -= 1
    x /= 3
    assert x is alias
    assert x.add_(1) is alias
    assert x.tolist() == [2.0, 2.0, 2.0]


def test_same_impl_returns_same_python_object():
    x = kael.ones(2, 2)
    # contiguous() of a contiguous tensor returns the same tensor -> the same Python object
    assert x.contiguous() is x
    y = x.to(kael.float32)
    assert y is x


def test_subclass_survives_round_trip_through_cpp():
    class MyTensor(kael.Tensor):
        pass

    m = MyTensor(kael.ones(3))
    assert type(m) is MyTensor
    assert type(m.add_(1)) is MyTensor
    assert m.add_(1) is m
    assert m.contiguous() is m
    assert m.tolist() == [3.0, 3.0, 3.0]


def test_weak_references_and_identity_hash():
    x = kael.zeros(2)
    y = kael.zeros(2)
    r = weakref.ref(x)
    assert r() is x
    d = WeakIdKeyDictionary()
    d[x] = "value"
    d[y] = "other"
    assert d[x] == "value" and d[y] == "other"
    assert hash(x) == hash(x) and {x: 1, y: 2}[x] == 1
    del x
    gc.collect()
    assert r() is None
    assert len(d) == 1 and list(d) == [y]


def test_views_keep_storage_alive():
    base = kael.arange(12).reshape(3, 4)
    view = base[1:, ::2]
    del base
    gc.collect()
    assert view.tolist() == [[4, 6], [8, 10]]


def _busy_count_while(work):
    done = threading.Event()
    result = {}

    def run():
        result["value"] = work()
        done.set()

    t = threading.Thread(target=run)
    t.start()
    count = 0
    while not done.is_set():
        count += 1
    t.join()
    return count, result["value"]


def test_gil_is_released_during_matmul():
    a = kael.ones(1500, 1500)
    b = kael.ones(1500, 1500)

    def work():
        for _ in range(3):
            c = a @ b
        return c

    count, c = _busy_count_while(work)
    assert c[0, 0].item() == 1500.0
    assert count > 100, f"the main thread ran only {count} iterations while matmul ran"


def test_gil_is_released_during_large_reduction():
    a = kael.ones(1 << 24)

    def work():
        total = 0.0
        for _ in range(4):
            total += a.sum().item()
        return total

    count, total = _busy_count_while(work)
    assert total == 4.0 * (1 << 24)
    assert count > 100, f"the main thread ran only {count} iterations while sum ran"


def test_version_counter_is_shared_by_views_and_bumped_by_writes():
    base = kael.zeros(2, 3)
    view = base[0]
    v0 = base._version
    view.add_(1)
    assert base._version == view._version == v0 + 1
    base[1] = 5.0
    x = base.T
    x *= 2
    assert base._version == v0 + 3
    assert (base + 1)._version == 0  # a new result has its own counter


def test_cuda_requests_raise_a_clear_error_without_a_cuda_backend():
    import pytest
    assert kael.cuda_is_available() is False
    for make in (lambda: kael.zeros(2, device="cuda"), lambda: kael.ones(2).cuda(),
                 lambda: kael.ones(2).to("cuda:0"), lambda: kael.tensor([1.0], device="cuda")):
        with pytest.raises(RuntimeError, match="CUDA"):
            make()


def test_fork_keeps_parallel_work_running():
    # The parent starts the thread pools (kael's and oneDNN's OpenMP team); a forked child must
    # still compute, with the parent's thread count (Note [Threads after fork]), instead of
    # waiting forever for threads that do not exist in it. test_threads.py checks the threads.
    import os
    import select

    a = kael.ones(1 << 20)
    assert (a + a).sum().item() == 2.0 * (1 << 20)
    _ = kael.ones(256, 256) @ kael.ones(256, 256)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            b = kael.ones(1 << 20)
            total = (b + b).sum().item() + (kael.ones(256, 256) @ kael.ones(256, 256)).sum().item()
            os.write(write_fd, repr((total, kael.get_num_threads())).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    # wait for the child's result, or the end of the pipe when it exits: a child that hangs does
    # neither, and is killed after a generous safety timeout (not a measurement)
    readable, _, _ = select.select([read_fd], [], [], 600)
    if not readable:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(read_fd)
        raise AssertionError("the forked child hung")
    result = os.read(read_fd, 1000).decode()
    os.waitpid(pid, 0)
    os.close(read_fd)
    assert result == repr((2.0 * (1 << 20) + 256.0 ** 3, kael.get_num_threads()))


def test_cpp_warnings_become_python_warnings():
    import warnings

    import pytest
    import torch

    with pytest.warns(UserWarning, match="copy construct from a tensor"):
        copy = kael.tensor(kael.ones(2))
    assert copy.tolist() == [1.0, 1.0]
    with pytest.warns(UserWarning, match="x.T"):
        kael.ones(2, 3, 4).T
    # the same warning in torch, which gives it once per process unless told to warn always (an
    # earlier test may have had it)
    warn_always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    try:
        with pytest.warns(UserWarning, match="x.T"):
            torch.ones(2, 3, 4).T
    finally:
        torch.set_warn_always(warn_always)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert kael.ones(2, 3).T.shape == (3, 2)  # no warning for 2-d
        with pytest.raises(UserWarning):  # a warning filtered into an error fails the call
            kael.ones(2, 3, 4).T
        with pytest.raises(UserWarning):
            kael.tensor(kael.ones(2))
    assert kael.ones(1).add(1).item() == 2.0  # nothing left pending afterwards


@pytest.mark.skipif(kael.cuda_is_available(), reason="this build has a CUDA backend")
@pytest.mark.parametrize("name,make", [
    ("to", lambda x: x.to("cuda")),
    ("to", lambda x: x.to("cuda:1", kael.float64)),
    ("to", lambda x: x.cuda()),
    ("zeros_like", lambda x: kael.zeros_like(x, device="cuda")),
    ("ones_like", lambda x: kael.ones_like(x, device="cuda")),
    ("empty_like", lambda x: kael.empty_like(x, device="cuda:0")),
    ("full_like", lambda x: kael.full_like(x, 2.0, device="cuda")),
    ("empty", lambda x: kael.empty(2, device="cuda")),
])
def test_device_arguments_choose_the_kernel_of_the_target_device(name, make):
    # The call dispatches to the CUDA key (whose stub answers), not to the CPU kernel of x.
    with pytest.raises(RuntimeError, match=f"{name} is not implemented for CUDA: this build of kael has no CUDA "
                                           "backend"):
        make(kael.ones(2, 3))


@pytest.mark.parametrize("make", [
    lambda m, x: x.to("cpu"),
    lambda m, x: m.zeros_like(x, device="cpu"),
    lambda m, x: m.full_like(x, 2, device="cpu", dtype=m.int64),
    lambda m, x: m.ones_like(x.T, device=None),
])
def test_cpu_device_arguments_match_torch(make):
    compare(lambda m: make(m, m.ones(2, 3)))
