"""Threads sharing tensors (Note [Concurrency] in kael/core/concurrency.h): loops of large
operands run without the GIL on state of their own, so resizes through out=, empty_cache(),
garbage collection and other threads' ops can change what they read only in value, never free
it or change its geometry under them. Every case runs in a fresh interpreter, so a crash fails
the test instead of killing the suite.

KAEL_STRESS_SECONDS sets how long the stress test runs (default 2; tools/stress_threads.sh
runs it for minutes)."""
import os
import subprocess
import sys
import textwrap

import pytest


def run(code, timeout=300):
    env = dict(os.environ)
    env.setdefault("KAEL_NUM_THREADS", "2")
    timeout *= float(os.environ.get("KAEL_TEST_TIMEOUT_FACTOR", "1"))  # sanitizer runs are slower
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert proc.returncode == 0, f"exit status {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


# The reproducer: one thread multiplies a large tensor (its loop runs without the GIL)
# while another resizes it through out= and empties the allocator's cache. Before the loop held
# its own state, this read freed memory and crashed within two seconds in every run. Here the
# resizer also grows the storage in place under the running loop (through an empty view at the
# end of the tensor's elements), and writes t's own elements only under `lock`, which the reader
# holds around its op: the values have no race, so they are checked exactly, and the script
# is race-free for ThreadSanitizer (tools/run_sanitizers.sh --tsan).
RESIZE_DURING_LOOP = """
import threading, time, warnings
import kael
warnings.simplefilter("ignore")
N = 1 << 20
t = kael.ones(N)
lock = threading.Lock()
reading = threading.Event()
stop = False

def resizer():
    k = 0
    while not stop:
        reading.wait(0.1)                       # the reader is about to run its loop
        reading.clear()
        kael.add(kael.ones(0), 0, out=t)        # t shrinks to no elements under the running loop
        kael.empty_cache()
        if k < N:
            k += 4096
        tail = t.as_strided((0,), (1,), N)      # the elements after t's: growing it grows the storage
        kael.add(kael.ones(k), 0, out=tail)
        kael.empty_cache()
        with lock:
            kael.add(kael.ones(N), 0, out=t)    # back to N ones

th = threading.Thread(target=resizer)
th.start()
end = time.monotonic() + {seconds}
n = large = 0
try:
    while time.monotonic() < end or large == 0:   # (until the loop has seen the large tensor)
        with lock:
            reading.set()
            r = t * 1.0
        n += 1
        if r.numel():
            large += 1
            assert r.shape == (N,) and r.sum().item() == N
finally:
    stop = True
    th.join()
print(n, large)
"""


def test_resize_and_empty_cache_during_a_loop_cannot_free_its_memory():
    n, large = map(int, run(RESIZE_DURING_LOOP.format(seconds=2.0)).split())
    assert large > 0, "the loop never saw the large tensor: the test would not reach the race"


# Growing a storage in place while another thread's loop reads it: the loop keeps the memory it
# started on (the old memory is retired, not freed, while the loop has it pinned), so it sees
# exactly the values it started with even though the freed memory would be taken at once by a
# tensor of -1s.
GROW_DURING_LOOP = """
import threading, time, warnings
import kael
warnings.simplefilter("ignore")
N = 1 << 20
stop = False
t = kael.full((N,), 3.0)

def grower():
    k = 0
    while not stop and k < 16 * N:
        tail = t.as_strided((0,), (1,), N)
        kael.add(kael.full((k + 4096,), 5.0), 0, out=tail)  # the storage grows: new memory
        junk = kael.full((N + k,), -1.0)                    # the size of the old memory
        k += 4096
        del junk
        kael.empty_cache()

th = threading.Thread(target=grower)
th.start()
end = time.monotonic() + 2.0
loops = 0
try:
    while time.monotonic() < end or loops == 0:   # (one loop at least, however slow the machine)
        s = (t * 1.0).sum().item()
        loops += 1
        assert s == 3.0 * N, s
finally:
    stop = True
    th.join()
print(loops)
"""


def test_growing_a_storage_while_another_thread_reads_it():
    assert int(run(GROW_DURING_LOOP)) > 0


STRESS = r"""
import gc, os, random, threading, time, warnings, weakref
import kael
warnings.simplefilter("ignore")
SECONDS = float(os.environ.get("KAEL_STRESS_SECONDS", "2"))
THREADS = 8
BIG = 1 << 17          # above the GIL-release threshold: loops run without the GIL
M = 256                # M x M matmul: 65536 elements

# KAEL_STRESS_RACE_FREE=1 (the ThreadSanitizer run): no two threads touch the same element
# while one writes it. Shared tensors are then written only by their owner thread, and only in
# ways other threads' loops cannot see: shrinking to no elements, or growing the storage through
# an empty view after the tensor's elements; the owner replaces its tensor now and then.
RACE_FREE = os.environ.get("KAEL_STRESS_RACE_FREE") == "1"

def fresh(i):
    return [kael.arange(BIG, dtype=kael.float64), kael.ones(BIG), kael.ones(M, M)][i % 3]

shared = [fresh(i) for i in range(THREADS)]
errors, failures, counts = [], [], [0] * THREADS

def private_work(rng):
    # values every result must have exactly (float64 sums of small integers are exact)
    a = kael.arange(BIG, dtype=kael.float64)
    k = rng.randrange(1, 5)
    b = a * k + 1                                       # pointwise
    assert b.sum().item() == k * (BIG - 1) * BIG / 2 + BIG
    assert (a + a).mean().item() == BIG - 1             # reduction
    c = kael.empty(BIG, dtype=kael.float64)
    c.copy_(b)                                          # copy_
    assert c[BIG // 2].item() == k * (BIG // 2) + 1     # indexing
    c[::2] = 0.0                                        # setitem
    assert c.sum().item() == sum(k * i + 1 for i in range(1, BIG, 2))
    c.fill_(2.0)
    assert c.sum().item() == 2.0 * BIG
    c.zero_()
    assert c.sum().item() == 0.0
    m = kael.ones(M, M, dtype=kael.float64)
    assert (m @ m)[3, 7].item() == M                    # matmul
    out = kael.empty(5, dtype=kael.float64)             # out= resized (grows in place)
    kael.add(a, 1, out=out)
    assert out.shape == (BIG,) and out[-1].item() == BIG
    w = weakref.ref(out)
    del out
    gc.collect()
    assert w() is None

def owner_work(i, rng):
    s = shared[i]
    op = rng.randrange(4)
    if op == 0:
        kael.add(kael.ones(0, dtype=s.dtype), 1, out=s)   # no elements: nothing is written
    elif op == 1:
        extent = BIG if s.dim() == 1 else M * M             # elements s had when it was made
        tail = s.as_strided((0,), (1,), extent)
        kael.add(kael.ones(rng.randrange(1, 2 * BIG), dtype=s.dtype), 1, out=tail)
    elif op == 2:
        shared[i] = fresh(i)
    else:
        kael.empty_cache()

def shared_work(i, rng):
    # any value is fine (other threads write these tensors); shapes and dtypes must be sane
    if RACE_FREE and rng.randrange(3) == 0:
        return owner_work(i, rng)
    s = rng.choice(shared)
    op = rng.randrange(9)
    if RACE_FREE and op in (3, 7):
        s = s.clone()  # a write others could see: on a copy of one's own instead
    if op == 0:
        r = s * 2.0
    elif op == 1:
        r = s.sum()
    elif op == 2:
        r = s.sum(0) if s.dim() else s.sum()
    elif op == 3:
        n = rng.choice([1, 7, BIG, 2 * BIG, M * M])
        r = kael.add(kael.ones(n, dtype=s.dtype), 1, out=s)
        assert r is s  # its shape may already be another thread's
    elif op == 4:
        r = s.clone().fill_(rng.random())
    elif op == 5:
        kael.empty_cache()
        r = None
    elif op == 6:
        r = s[: rng.randrange(1, 100)].contiguous()
    elif op == 7:
        s[: rng.randrange(1, 100)] = 4.0
        r = None
    else:
        x = s.reshape(-1)[: M * M] if s.numel() >= M * M else None
        r = x.reshape(M, M) @ x.reshape(M, M) if x is not None else None
    if r is not None:
        n = 1
        for d in r.shape:
            n *= d
        assert r.numel() == n and len(r.stride()) == r.dim()
        assert r.dtype in (kael.float32, kael.float64)
    gc.collect(0)

def worker(i):
    rng = random.Random(i)
    end = time.monotonic() + SECONDS
    try:
        while time.monotonic() < end or counts[i] == 0:   # (one round at least, however slow the machine)
            if i % 2 == 0:
                private_work(rng)
            for _ in range(4):
                try:
                    shared_work(i, rng)
                except (ValueError, RuntimeError, IndexError) as e:
                    # shared tensors change shape under other threads' feet: a Python error
                    # from a check is fine, a crash or a wrong private value is not
                    errors.append(type(e).__name__)
            counts[i] += 1
    except AssertionError as e:
        import traceback
        failures.append(traceback.format_exc())

threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not failures, failures[0]
assert all(counts), counts
print(sum(counts), len(errors))
"""


def test_stress_threads_mixing_ops_resizes_and_empty_cache():
    seconds = float(os.environ.get("KAEL_STRESS_SECONDS", "2"))
    total, _ = map(int, run(STRESS, timeout=seconds * 3 + 300).split())
    assert total > 0
