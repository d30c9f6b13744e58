"""kael's thread count and thread pool (Note [Thread pool], Note [Process-wide thread count] and
Note [Threads after fork] in kael/runtime/threads.h).

kael.set_num_threads and KAEL_NUM_THREADS are process-wide: every thread, Python threads created
later included, runs kael's parallel loops on kael's pool with the set count (float32 matmul too,
where kael's GEMM is built: Note [float32 GEMM] in native/cpu/gemm.cpp), and oneDNN's matmul with
an OpenMP team of that size. Each case runs in a fresh interpreter. The threads that
run a loop are observed through the pool's trace (kael._C._parallel_trace_start/stop: the OS
thread ids that ran chunks of the pool's regions); OpenMP teams through the OS threads that one
Python thread's first team adds (GNU OpenMP keeps a team's threads while the thread that started
it lives)."""
import json
import os
import re
import subprocess
import sys

import pytest
import torch

import kael

PRELUDE = r"""
import json, os, threading, time
import kael

A = kael.ones(256, 256)       # matmul's operands, made before anything is measured
NARROW = kael.ones(256, 8)    # a product 8 columns wide goes to oneDNN also where kael's GEMM is built
C = kael._C
GEMM = C._gemm_f32_available()

def os_threads():
    return len(os.listdir("/proc/self/task"))

BASE = os_threads() - C._pool_workers()

def settle():
    # the OpenMP threads of Python threads that have ended exit asynchronously: wait for them
    deadline = time.monotonic() + 10
    while os_threads() > BASE + threading.active_count() - 1 + C._pool_workers() and time.monotonic() < deadline:
        time.sleep(0.01)

def team_size(work):
    # OS threads a parallel region started by the calling thread adds, plus the thread itself
    # (for a thread that has not run an OpenMP region before): oneDNN's team
    settle()
    before = os_threads() - C._pool_workers()
    work()
    return os_threads() - C._pool_workers() - before + 1

def pool_threads(work):
    # the most threads that ran chunks of one of work's parallel regions on kael's pool
    C._parallel_trace_start()
    work()
    return C._parallel_trace_stop()["max_region_threads"]

def loop():
    x = kael.ones(1 << 20)   # far above the grain: a parallel fill and a parallel pointwise loop
    kael.add(x, x)

def reduction():
    kael.ones(1 << 20).sum()

def matmul():
    A @ NARROW                # oneDNN, which takes OpenMP's count of the calling thread

def gemm():
    A @ A                     # kael's GEMM, on kael's pool, where the build has it; else oneDNN

def measure(work):
    return team_size(work) if work is matmul or (work is gemm and not GEMM) else pool_threads(work)

def in_new_thread(f):
    out = {}
    t = threading.Thread(target=lambda: out.update(value=f()))
    t.start()
    t.join()
    return out["value"]
"""


def run(body, env=None):
    full_env = dict(os.environ)
    full_env.pop("OMP_NUM_THREADS", None)
    full_env.pop("KAEL_NUM_THREADS", None)
    full_env.update(env or {})
    # sanitizer runs are slower: tools/run_sanitizers.sh --tsan sets the factor
    timeout = 120 * float(os.environ.get("KAEL_TEST_TIMEOUT_FACTOR", "1"))
    proc = subprocess.run([sys.executable, "-c", PRELUDE + body], capture_output=True, text=True, timeout=timeout,
                          env=full_env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def target_count():
    # a count no thread would use by default (the default is the number of cores)
    return len(os.sched_getaffinity(0)) + 2


@pytest.mark.parametrize("work", ["loop", "reduction", "matmul", "gemm"])
def test_set_num_threads_holds_in_python_threads_created_later(work):
    n = target_count()
    out = run(f"""
kael.set_num_threads({n})
print(json.dumps({{"get": in_new_thread(kael.get_num_threads), "team": in_new_thread(lambda: measure({work}))}}))
""")
    assert out == {"get": n, "team": n}


@pytest.mark.parametrize("work", ["loop", "matmul", "gemm"])
def test_set_num_threads_in_one_thread_holds_in_the_others(work):
    n = target_count()
    out = run(f"""
in_new_thread(lambda: kael.set_num_threads({n}))
print(json.dumps({{"get": kael.get_num_threads(), "team": measure({work})}}))
""")
    assert out == {"get": n, "team": n}


@pytest.mark.parametrize("work", ["loop", "matmul", "gemm"])
def test_environment_variable_holds_in_every_thread(work):
    n = target_count()
    out = run(f"""
first = in_new_thread(kael.get_num_threads)       # the first thread to ask is not the main one
print(json.dumps({{"first": first, "main": kael.get_num_threads(),
                   "team": in_new_thread(lambda: measure({work})), "main_team": measure({work})}}))
""", env={"KAEL_NUM_THREADS": str(n)})
    assert out == {"first": n, "main": n, "team": n, "main_team": n}


def test_changing_the_count_reaches_threads_that_already_ran():
    # oneDNN reads the count from the calling thread's OpenMP setting, which kael updates when the
    # process-wide value changed since that thread last ran an op. The thread's team grows from
    # OpenMP's default to n: its size is the first team's plus the threads the second one adds.
    # kael's own loops read the count at every region.
    n = target_count()
    out = run(f"""
import queue
todo, done = queue.Queue(), queue.Queue()
def worker():
    while (job := todo.get()) is not None:
        done.put(job())
t = threading.Thread(target=worker)
t.start()
todo.put(lambda: (team_size(matmul), pool_threads(loop)))
first, first_loop = done.get()
kael.set_num_threads({n})
todo.put(lambda: (kael.get_num_threads(), team_size(matmul) - 1, pool_threads(loop)))
get, added, loop_threads = done.get()
todo.put(None)
t.join()
print(json.dumps({{"first": first, "first_loop": first_loop, "get": get, "team": first + added, "loop": loop_threads}}))
""")
    cores = len(os.sched_getaffinity(0))
    assert out["first"] == cores and out["first_loop"] == cores
    assert out["get"] == n and out["team"] == n and out["loop"] == n


@pytest.mark.parametrize("value", ["lots", "0", "1025", "-2", "2.5", " 2", "2 ", "0x4", "99999999999999999999"])
def test_invalid_environment_variable_raises_on_get_but_set_still_works(value):
    out = run("""
try:
    kael.get_num_threads()
    error = None
except ValueError as e:
    error = str(e)
loop_threads = pool_threads(loop)    # kernels run with the default count meanwhile
kael.set_num_threads(2)
print(json.dumps({"error": error, "after": kael.get_num_threads(), "sum": kael.ones(1 << 20).sum().item(),
                  "loop": loop_threads}))
""", env={"KAEL_NUM_THREADS": value})
    assert f"KAEL_NUM_THREADS: expected an integer in 1..1024, got '{value}'" in out["error"]
    assert out["after"] == 2 and out["sum"] == float(1 << 20)
    assert out["loop"] == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("n", [0, -1, 1025, 2**40])
def test_set_num_threads_outside_1_to_1024_raises_runtime_error_naming_the_value(n):
    before = kael.get_num_threads()
    if n <= 0:  # torch's class (it takes any positive count)
        with pytest.raises(RuntimeError):
            torch.set_num_threads(n)
    with pytest.raises(RuntimeError, match=rf"set_num_threads: expected 1\.\.1024, got {n}\b"):
        kael.set_num_threads(n)
    assert kael.get_num_threads() == before


def test_pool_workers_follow_the_count():
    # The pool keeps count - 1 workers (the calling thread is the count's last one): started on the
    # first region that needs them, stopped (and joined) when the count shrinks.
    out = run("""
seen = []
for n in (4, 2, 3, 1, 2):
    kael.set_num_threads(n)
    threads = pool_threads(loop)
    seen.append([n, threads, C._pool_workers(), os_threads() - BASE])
print(json.dumps(seen))
""")
    for n, threads, workers, extra in out[:3]:
        assert threads == n and workers == n - 1 and extra == n - 1
    # one thread: nothing reaches the pool (its workers stay until a region needs fewer)
    assert out[3][:2] == [1, 0]
    assert out[4] == [2, 2, 1, 1]


def test_small_tensors_never_touch_the_pool():
    # Up to the grain (kParallelGrain elements in kael/native/loops.h) every op runs on the
    # calling thread; above it, the same ops run on the pool.
    out = run("""
kael.set_num_threads(4)
def ops(n):
    x = kael.ones(n)
    y = kael.exp(x + x) * 2
    y.sum(); y.mean(); y.clone(); y.fill_(3.0); x.copy_(y)
    kael.ones(n // 8, 8).sum(dim=0)
C._parallel_trace_start()
ops(32768)
small = C._parallel_trace_stop()
C._parallel_trace_start()
ops(1 << 20)
large = C._parallel_trace_stop()
print(json.dumps({"small": small, "large": large}))
""")
    assert out["small"] == {"regions": 0, "threads": 0, "max_region_threads": 0}
    assert out["large"]["regions"] >= 8 and out["large"]["max_region_threads"] == 4


def pieces_expected(n, grain, threads):
    # Note [Pieces and stealing]: ceil(n / grain) pieces, at most 8 per thread, of equal size but
    # the last
    wanted = min(-(-n // grain), 8 * threads)
    size = -(-n // wanted)
    return [(b, min(n, b + size)) for b in range(0, n, size)]


def test_parallel_for_pieces_cover_the_range():
    before = kael.get_num_threads()
    try:
        for n_threads in (1, 2, 3):
            kael.set_num_threads(n_threads)
            assert kael._C._parallel_for_test(1000, 1000) == [(0, 1000)]      # at most the grain: inline
            assert kael._C._parallel_for_test(0, 1) == []
            for n, grain in ((1000, 10), (1000, 100), (15, 10), (4097, 64), (1 << 20, 32768)):
                pieces = kael._C._parallel_for_test(n, grain)
                assert pieces == ([(0, n)] if n_threads == 1 else pieces_expected(n, grain, n_threads))
                assert pieces[0][0] == 0 and pieces[-1][1] == n
                assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))
            assert kael._C._parallel_for_test(15, 10) == ([(0, 15)] if n_threads == 1 else [(0, 8), (8, 15)])
            if n_threads > 1:
                assert len(kael._C._parallel_for_test(1000, 10)) == 8 * n_threads
    finally:
        kael.set_num_threads(before)


@pytest.mark.parametrize("on_caller", [True, False], ids=["caller-stalls", "worker-stalls"])
def test_a_stalled_thread_s_pieces_run_on_the_others(on_caller):
    # Note [Pieces and stealing]: 16 pieces of 100 on 2 threads, 0..799 dealt to the calling
    # thread and 800..1599 to the worker. The first piece to run on the chosen thread waits until
    # every other piece has run, so the other thread runs them all: its own and those it steals
    # from the stalled thread's run (without stealing, the wait times out and the stalled thread
    # runs the rest of its run itself).
    before = kael.get_num_threads()
    kael.set_num_threads(2)
    try:
        timeout = 20 * float(os.environ.get("KAEL_TEST_TIMEOUT_FACTOR", "1"))
        pieces = kael._C._parallel_for_stall_test(1600, 100, on_caller, timeout)
    finally:
        kael.set_num_threads(before)
    assert [(b, e) for b, e, _, _ in pieces] == [(b, b + 100) for b in range(0, 1600, 100)]
    stalled = [p for p in pieces if p[3]]
    # (a worker that woke after the calling thread had run every piece stalls in none)
    assert len(stalled) == (1 if on_caller else len(stalled)) and len(stalled) <= 1
    assert all(p[2] == on_caller for p in stalled)
    assert all(here != on_caller for _, _, here, stall in pieces if not stall), pieces
    if on_caller:
        # the caller stalled in its first piece, 0..99: the worker stole the 7 others of its run
        assert stalled[0][:2] == (0, 100)


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), -1.0, 1e9])
def test_stall_hook_rejects_a_timeout_out_of_range(timeout):
    with pytest.raises(ValueError, match=r"_parallel_for_stall_test: timeout_s must be in \[0, 3600\], got"):
        kael._C._parallel_for_stall_test(1600, 100, True, timeout)


@pytest.mark.parametrize("fail_at", [0, 499, 500, 999], ids=lambda f: f"element{f}")
def test_exceptions_inside_parallel_regions_reach_the_caller(fail_at):
    # With 2 threads, 10 pieces of 100: elements 0..499 are dealt to the calling thread and
    # 500..999 to a pool worker: an exception thrown on either is raised as the Python exception
    # of its class, and the process
    # goes on (before the pool, an exception leaving an OpenMP region terminated the process).
    before = kael.get_num_threads()
    kael.set_num_threads(2)
    try:
        piece = re.escape(f"[{fail_at // 100 * 100}, {fail_at // 100 * 100 + 100})")
        with pytest.raises(ValueError, match=rf"_parallel_for_test: element {fail_at} failed in the piece {piece}"):
            kael._C._parallel_for_test(1000, 100, (fail_at,))
        # Pieces on both threads fail: the first exception wins, the other is dropped.
        with pytest.raises(ValueError, match=r"_parallel_for_test: element (0|999) failed"):
            kael._C._parallel_for_test(1000, 100, (0, 999))
        assert kael._C._parallel_for_test(1000, 100) == [(b, b + 100) for b in range(0, 1000, 100)]  # still works
        x = kael.ones(1 << 20)
        assert (x + x).sum().item() == 2.0 * (1 << 20)
    finally:
        kael.set_num_threads(before)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sums_do_not_depend_on_the_thread_count(dtype):
    # Note [Deterministic sums] (kael/native/cpu/reduce.cpp): blocks at fixed offsets, added in
    # order, so every thread count gives the same bits.
    import numpy as np
    rng = np.random.default_rng(7)
    data = rng.standard_normal(1 << 22).astype(dtype) * rng.uniform(0.1, 1e4, 1 << 22).astype(dtype)
    x = kael.tensor(data)
    before = kael.get_num_threads()
    results = {}
    try:
        for n in (1, 2, 3, 4):
            kael.set_num_threads(n)
            results[n] = (x.sum().item().hex(), x.mean().item().hex(), x[1:].sum().item().hex(),
                          [v.hex() for v in x.reshape(2048, 2048).sum(dim=1).tolist()],
                          [v.hex() for v in x.reshape(2048, 2048).T.sum(dim=0).tolist()])
    finally:
        kael.set_num_threads(before)
    assert all(results[n] == results[1] for n in results)
    assert abs(float.fromhex(results[1][0]) - data.astype("float64").sum()) <= 1e-6 * np.abs(data).sum()


# ---------------------------------------------------------------- fork

FORK_PRELUDE = """
import multiprocessing as mp
ctx = mp.get_context("fork")
TIMEOUT = 60 * float(os.environ.get("KAEL_TEST_TIMEOUT_FACTOR", "1"))

def child_main(conn, set_threads):
    try:
        if set_threads:
            kael.set_num_threads(set_threads)
        workers_at_start = C._pool_workers()     # the parent's workers do not exist here
        x = kael.arange(1 << 22, dtype=kael.float32) / float(1 << 22)
        C._parallel_trace_start()
        y = kael.exp(x + x)
        total = y.sum().item()
        trace = C._parallel_trace_stop()
        C._parallel_trace_start()
        m = A @ A                                # kael's GEMM on the new pool (else oneDNN)
        gemm_trace = C._parallel_trace_stop()
        narrow = A @ NARROW                      # oneDNN, on one OpenMP thread in a forked child
        conn.send({"get": kael.get_num_threads(), "workers_at_start": workers_at_start, "trace": trace,
                   "workers": C._pool_workers(), "total": total,
                   "first": y[:3].tolist(), "last": y[-1].item(),
                   "matmul": [m.sum().item(), m[17, 5].item()],
                   "gemm_threads": gemm_trace["max_region_threads"], "gemm": GEMM,
                   "narrow": [narrow.sum().item(), narrow[17, 5].item()]})
    except BaseException as e:
        conn.send({"error": repr(e)})

def fork_and_check(set_threads, target=child_main):
    # runs target(conn, set_threads) in a child made by fork(); returns what it sent
    parent_conn, child_conn = ctx.Pipe()
    p = ctx.Process(target=target, args=(child_conn, set_threads))
    p.start()
    got = parent_conn.recv() if parent_conn.poll(TIMEOUT) else {"error": "the child hung"}
    p.join(TIMEOUT)
    if p.is_alive():
        p.kill()
        p.join()
    got["exitcode"] = p.exitcode
    return got
"""


def check_child(child):
    assert "error" not in child, child["error"]
    assert child["exitcode"] == 0
    assert child["get"] == 2 and child["workers_at_start"] == 0
    assert child["trace"]["threads"] == 2 and child["trace"]["max_region_threads"] == 2
    assert child["workers"] == 1
    assert child["matmul"] == [256.0 ** 3, 256.0]
    assert child["narrow"] == [256.0 ** 2 * 8, 256.0]
    # kael's GEMM computes on both threads of the child's pool
    assert child["gemm_threads"] == (2 if child["gemm"] else 0)


@pytest.mark.parametrize("parent_threads, child_threads", [(4, 2), (2, 0), (1, 2)],
                         ids=["child-sets-2", "child-keeps-2", "parent-1-child-2"])
def test_forked_child_computes_in_parallel(parent_threads, child_threads):
    # The parent ran parallel loops (its pool has workers) and oneDNN (its OpenMP team exists);
    # the child computes on two threads of a new pool (the parent's count, or the one it sets),
    # float32 matmul too where kael's GEMM is built, and oneDNN's matmul on one OpenMP thread.
    out = run(FORK_PRELUDE + f"""
kael.set_num_threads({parent_threads})
loop(); matmul(); gemm(); reduction()
parent = {{"workers": C._pool_workers(), "loop": pool_threads(loop)}}
child = fork_and_check({child_threads})
x = kael.arange(1 << 22, dtype=kael.float32) / float(1 << 22)   # the parent computes as before
expected = kael.exp(x + x)
print(json.dumps({{"parent": parent, "child": child, "expected_total": expected.sum().item(),
                   "expected_first": expected[:3].tolist(), "expected_last": expected[-1].item(),
                   "parent_after": pool_threads(loop)}}))
""")
    check_child(out["child"])
    threads = parent_threads if parent_threads > 1 else 0  # one thread never reaches the pool
    assert out["parent"]["loop"] == threads
    if parent_threads > 1:
        assert out["parent"]["workers"] == parent_threads - 1
    # the same values as the parent's (sums: the same bits with any thread count)
    child = out["child"]
    assert child["total"] == out["expected_total"]
    assert child["first"] == out["expected_first"] and child["last"] == out["expected_last"]
    assert out["parent_after"] == threads


def test_grandchild_computes_in_parallel():
    # A forked child's pool restarts again in the child's own forked child.
    out = run(FORK_PRELUDE + """
kael.set_num_threads(2)
loop(); matmul(); gemm()

def middle(conn, _):
    try:
        loop()
        conn.send(fork_and_check(2))
    except BaseException as e:
        conn.send({"error": repr(e)})

got = fork_and_check(0, target=middle)
print(json.dumps(got))
""")
    assert out["exitcode"] == 0
    check_child(out)


# ---------------------------------------------------------------- workers off the caller's CPU

AFFINITY_PRELUDE = """
def parse_cpus(text):
    cpus = set()
    for part in text.split(","):
        a, _, b = part.partition("-")
        cpus.update(range(int(a), int(b or a) + 1))
    return cpus

def allowed(tid):
    with open(f"/proc/self/task/{tid}/status") as f:
        for line in f:
            if line.startswith("Cpus_allowed_list:"):
                return parse_cpus(line.split(":", 1)[1].strip())

def tasks():
    return {int(t) for t in os.listdir("/proc/self/task")}

def worker_sets():
    # the CPU sets of the pool's workers, the threads named kael-pool (a sanitizer's runtime may
    # start threads of its own)
    workers = []
    for t in tasks():
        with open(f"/proc/self/task/{t}/comm") as f:
            if f.read().strip() == "kael-pool":
                workers.append(t)
    assert len(workers) == C._pool_workers()
    return sorted(sorted(allowed(t)) for t in workers)
"""


def needs_two_cpus():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("a caller's CPU can be kept free of workers only with 2 CPUs or more")


def current_cpu_source():
    return """
def current_cpu():
    with open("/proc/thread-self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])   # field 39: the CPU it runs on
"""


def test_workers_wake_off_the_caller_s_cpu():
    # Note [Workers off the caller's CPU]: after a region, the workers' CPU sets are the caller's
    # CPUs but the one it runs on; when the caller moves to another CPU, the next region moves the
    # exclusion with it. (The caller is moved by binding it to one CPU and releasing it; it may
    # move again by itself before the region starts, so each move is tried up to 20 times.)
    needs_two_cpus()
    out = run(AFFINITY_PRELUDE + current_cpu_source() + """
mine = sorted(os.sched_getaffinity(0))
kael.set_num_threads(2)
loop()
first = worker_sets()
moved = {}
for cpu in mine[:2]:
    for attempt in range(20):
        os.sched_setaffinity(0, {cpu})
        os.sched_setaffinity(0, mine)
        loop()
        sets, now = worker_sets(), current_cpu()
        if now == cpu and sets == [sorted(set(mine) - {cpu})]:
            break
    moved[cpu] = [sets, now]
print(json.dumps({"mine": mine, "first": first, "moved": moved, "pool": pool_threads(loop)}))
""")
    mine = set(out["mine"])
    assert len(out["first"]) == 1
    worker = set(out["first"][0])
    assert worker < mine and len(mine - worker) == 1
    for cpu, (sets, now) in out["moved"].items():
        assert now == int(cpu) and sets == [sorted(mine - {int(cpu)})], out
    assert out["pool"] == 2


def test_workers_keep_the_caller_s_cpus_when_there_are_too_few():
    # More threads than the caller's CPUs, or a caller bound to one CPU: the workers' sets are
    # the caller's set, and every region still runs on all its threads.
    out = run(AFFINITY_PRELUDE + """
mine = sorted(os.sched_getaffinity(0))
kael.set_num_threads(len(mine) + 1)
loop()
crowded = worker_sets()
crowded_pool = pool_threads(loop)
one = mine[-1]
os.sched_setaffinity(0, {one})           # the caller alone (Linux: the calling thread)
kael.set_num_threads(2)
loop()
print(json.dumps({"mine": mine, "crowded": crowded, "crowded_pool": crowded_pool, "one": one,
                  "bound": worker_sets(), "bound_pool": pool_threads(loop),
                  "sum": kael.arange(1 << 20, dtype=kael.float64).sum().item()}))
""")
    n = len(out["mine"])
    assert out["crowded"] == [out["mine"]] * n and out["crowded_pool"] == n + 1
    assert out["bound"] == [[out["one"]]] and out["bound_pool"] == 2
    assert out["sum"] == float((1 << 20) * ((1 << 20) - 1) // 2)


SPIN_PRELUDE = AFFINITY_PRELUDE + """
def the_worker():
    [w] = [t for t in tasks() if open(f"/proc/self/task/{t}/comm").read().strip() == "kael-pool"]
    return w

def blocked(tid):
    # how many times the thread has blocked (given up its CPU of its own accord)
    with open(f"/proc/self/task/{tid}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split(":", 1)[1])

def cpu_seconds(tid):
    with open(f"/proc/self/task/{tid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")   # utime + stime

def back_to_back(regions):
    # `regions` two-thread regions of next to no work, one after the other (the test hook's two
    # pieces of one element, so that what a worker spends is waiting, even under a sanitizer),
    # and how many times the worker blocked meanwhile and the CPU time it used
    C._parallel_for_test(2, 1)
    w = the_worker()
    before = blocked(w), cpu_seconds(w)
    for _ in range(regions):
        C._parallel_for_test(2, 1)
    return blocked(w) - before[0], cpu_seconds(w) - before[1]
"""


# How the workers wait between regions costs and saves CPU time (spinning back to back, no CPU
# once idle, no spinning on a shared CPU) is measured by tools/bench/pool_waits.py: on a loaded
# machine those figures vary with the load. The tests check what does not.

WAIT_UNTIL_BLOCKED = """
def state(tid):
    with open(f"/proc/self/task/{tid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]   # R running or runnable, S blocked

def until_blocked(w):
    # a worker that spins forever never blocks: a generous safety limit, not a measurement
    deadline = time.monotonic() + 120
    while state(w) != "S" and time.monotonic() < deadline:
        time.sleep(0.001)
    return state(w)

def idle_after_blocking(w):
    # once blocked with no region to run, the worker stays blocked: it neither wakes nor uses CPU
    before = blocked(w), cpu_seconds(w)
    time.sleep(0.2)
    return {"woke": blocked(w) - before[0], "cpu": cpu_seconds(w) - before[1], "state": state(w)}
"""


def test_idle_workers_block():
    # The spin is bounded (Note [Spinning before blocking]): after the last of regions issued back
    # to back the worker blocks, and then uses no CPU while no region comes.
    needs_two_cpus()
    out = run(SPIN_PRELUDE + WAIT_UNTIL_BLOCKED + """
kael.set_num_threads(2)
back_to_back(100)
w = the_worker()
print(json.dumps({"state": until_blocked(w), "idle": idle_after_blocking(w)}))
""")
    assert out == {"state": "S", "idle": {"woke": 0, "cpu": 0.0, "state": "S"}}, out


def test_workers_block_at_once_when_they_share_the_caller_s_cpu():
    # A caller bound to one CPU shares it with the workers: a spinning worker would hold the CPU
    # the caller needs, so there nobody spins: the worker blocks when it finds no region. The
    # regions run on both threads, the worker bound to the caller's CPU, and it ends blocked.
    out = run(SPIN_PRELUDE + WAIT_UNTIL_BLOCKED + """
one = sorted(os.sched_getaffinity(0))[-1]
os.sched_setaffinity(0, {one})
kael.set_num_threads(2)
back_to_back(300)
w = the_worker()
print(json.dumps({"one": one, "worker": sorted(os.sched_getaffinity(int(w))), "pool": pool_threads(loop),
                  "state": until_blocked(w), "idle": idle_after_blocking(w),
                  "sum": kael.arange(1 << 20, dtype=kael.float64).sum().item()}))
""")
    assert out["worker"] == [out["one"]] and out["pool"] == 2, out
    assert out["state"] == "S" and out["idle"] == {"woke": 0, "cpu": 0.0, "state": "S"}, out
    assert out["sum"] == float((1 << 20) * ((1 << 20) - 1) // 2)
