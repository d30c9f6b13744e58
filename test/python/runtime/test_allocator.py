"""Caching allocator statistics."""
import gc
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kael

KEYS = {"reserved_bytes", "in_use_bytes", "cached_bytes", "hits", "misses"}
BIG = 1 << 18  # float32 elements -> 1 MiB


def stats():
    s = kael.allocator_stats()
    assert isinstance(s, dict)
    return s


def test_allocator_stats_has_exactly_the_documented_int_keys():
    s = stats()
    assert set(s) == KEYS
    for k, v in s.items():
        assert type(v) is int, k
        assert v >= 0, k


def test_in_use_grows_while_tensor_alive_and_drops_after_del():
    gc.collect()
    before = stats()["in_use_bytes"]
    t = kael.empty(BIG)
    during = stats()["in_use_bytes"]
    assert during >= before + BIG * 4
    del t
    gc.collect()
    after = stats()["in_use_bytes"]
    assert after <= during - BIG * 4


def test_views_do_not_allocate_storage():
    t = kael.zeros(BIG)
    s0 = stats()["in_use_bytes"]
    views = [t[1:], t.view(512, 512), t.view(512, 512).T, t.unsqueeze(0), t.narrow(0, 0, 10)]
    assert stats()["in_use_bytes"] < s0 + BIG * 4
    del views, t


def test_storage_stays_alive_while_a_view_exists():
    t = kael.zeros(BIG)
    v = t[10:20]
    in_use = stats()["in_use_bytes"]
    del t
    gc.collect()
    assert stats()["in_use_bytes"] >= in_use - 64  # base storage still referenced by the view
    assert v.tolist() == [0.0] * 10
    v.add_(1)
    assert v.sum().item() == 10.0
    del v


def test_reallocating_same_size_after_del_is_a_cache_hit():
    t = kael.empty(BIG)
    del t
    gc.collect()
    s1 = stats()
    assert s1["cached_bytes"] >= BIG * 4
    t = kael.empty(BIG)
    s2 = stats()
    assert s2["hits"] >= s1["hits"] + 1
    del t


def in_fresh_interpreter(body):
    """Runs `body` (asserting what it checks) in a new interpreter with kael, no other thread but
    kael's pool: blocks that another live thread freed stay in that thread's cache and are still
    counted as cached (Note [Per-thread block cache]), so `cached_bytes == 0` after empty_cache()
    holds only where no earlier test left a thread that freed small blocks."""
    code = f"import gc, kael\nBIG = {BIG}\nstats = kael.allocator_stats\n" + textwrap.dedent(body)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[3])
    assert proc.returncode == 0, proc.stderr[-4000:]


def test_empty_cache_releases_cached_bytes():
    in_fresh_interpreter("""
        ts = [kael.empty(BIG), kael.empty(1000), kael.zeros(3, 7)]
        del ts
        gc.collect()
        assert stats()["cached_bytes"] > 0
        kael.empty_cache()
        s = stats()
        assert s["cached_bytes"] == 0, s
    """)


def test_allocation_after_empty_cache_is_a_miss():
    kael.empty_cache()
    s0 = stats()
    t = kael.empty(BIG + 12345)
    s1 = stats()
    assert s1["misses"] >= s0["misses"] + 1
    assert s1["in_use_bytes"] >= s0["in_use_bytes"] + (BIG + 12345) * 4
    del t


def test_hit_and_miss_counters_are_monotonic():
    s0 = stats()
    for _ in range(5):
        x = kael.ones(1000)
        y = x + 1
        del x, y
    s1 = stats()
    assert s1["hits"] >= s0["hits"] and s1["misses"] >= s0["misses"]
    assert s1["hits"] + s1["misses"] >= s0["hits"] + s0["misses"] + 10


def test_tensors_allocated_from_cache_have_correct_values():
    a = kael.full((BIG,), 7.0)
    del a
    gc.collect()
    z = kael.zeros(BIG)
    assert z.sum().item() == 0.0
    o = kael.ones(BIG, dtype=kael.int64)
    assert o.sum().item() == BIG
    del z, o


def test_many_allocations_do_not_leak():
    kael.empty_cache()
    gc.collect()
    base = stats()["in_use_bytes"]
    for i in range(200):
        t = kael.ones(1000 + i) * 2
        del t
    gc.collect()
    assert stats()["in_use_bytes"] <= base + 4096


# ---- one allocator per device behind a common interface


def test_allocator_stats_and_empty_cache_take_the_device():
    t = kael.empty(BIG + 777)
    by_default, by_keyword, by_position = stats(), kael.allocator_stats(device="cpu"), kael.allocator_stats("cpu")
    assert set(by_keyword) == set(by_position) == KEYS
    assert by_default["in_use_bytes"] == by_keyword["in_use_bytes"] == by_position["in_use_bytes"]
    assert kael.allocator_stats(device=None)["in_use_bytes"] == by_default["in_use_bytes"]
    del t
    assert kael.empty_cache(device="cpu") is None
    in_fresh_interpreter("""
        t = kael.empty(BIG + 777)
        del t
        gc.collect()
        assert stats()["cached_bytes"] > 0
        kael.empty_cache(device="cpu")
        assert stats()["cached_bytes"] == 0, stats()
        kael.empty(BIG + 777)
        assert stats()["cached_bytes"] > 0
        kael.empty_cache("cpu")
        assert stats()["cached_bytes"] == 0, stats()
    """)


@pytest.mark.skipif(kael.cuda_is_available(), reason="this build has a CUDA backend")
@pytest.mark.parametrize("fn", ["allocator_stats", "empty_cache"])
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_allocator_of_a_device_without_backend_raises_runtime_error(fn, device):
    with pytest.raises(RuntimeError, match=rf"^.*{fn}: device '{device}' requested, but this build of kael has no "
                                           "CUDA backend"):
        getattr(kael, fn)(device=device)


@pytest.mark.parametrize("fn", ["allocator_stats", "empty_cache"])
def test_allocator_of_an_unknown_device_raises_runtime_error(fn):
    # as torch.device("tpu")
    with pytest.raises(RuntimeError, match="device: Expected one of cpu, cuda device type at start of device string: 'tpu'"):
        getattr(kael, fn)("tpu")
    with pytest.raises(TypeError, match=f"{fn}: device must be a string"):
        getattr(kael, fn)(0)
    with pytest.raises(TypeError):
        getattr(kael, fn)("cpu", "cpu")
