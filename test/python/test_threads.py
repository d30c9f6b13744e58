"""kael.set_num_threads and KAEL_NUM_THREADS are process-wide (Note [Process-wide thread count]):
every thread, Python threads created later included, runs kael's parallel loops and oneDNN's
matmul with the set count. Each case runs in a fresh interpreter, and counts the OS threads the
OpenMP team of one Python thread adds (GNU OpenMP keeps a team's threads while the thread that
started it lives)."""
import json
import os
import subprocess
import sys

import pytest

PRELUDE = r"""
import json, os, threading, time
import kael

def os_threads():
    return len(os.listdir("/proc/self/task"))

BASE = os_threads()

def settle():
    # the OpenMP threads of Python threads that have ended exit asynchronously: wait for them
    deadline = time.monotonic() + 10
    while os_threads() > BASE + threading.active_count() - 1 and time.monotonic() < deadline:
        time.sleep(0.01)

def team_size(work):
    # OS threads a parallel region started by the calling thread adds, plus the thread itself
    # (for a thread that has not run a parallel region before)
    settle()
    before = os_threads()
    work()
    return os_threads() - before + 1

def loop():
    x = kael.ones(1 << 20)   # far above the grain: a parallel pointwise loop
    kael.add(x, x)

def reduction():
    kael.ones(1 << 20).sum()

def matmul():
    a = kael.ones(256, 256)
    a @ a                     # oneDNN, which takes OpenMP's count of the calling thread

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
    # a count no thread would use by default (OpenMP's default is the number of cores)
    return len(os.sched_getaffinity(0)) + 2


@pytest.mark.parametrize("work", ["loop", "reduction", "matmul"])
def test_set_num_threads_holds_in_python_threads_created_later(work):
    n = target_count()
    out = run(f"""
kael.set_num_threads({n})
print(json.dumps({{"get": in_new_thread(kael.get_num_threads), "team": in_new_thread(lambda: team_size({work}))}}))
""")
    assert out == {"get": n, "team": n}


@pytest.mark.parametrize("work", ["loop", "matmul"])
def test_set_num_threads_in_one_thread_holds_in_the_others(work):
    n = target_count()
    out = run(f"""
in_new_thread(lambda: kael.set_num_threads({n}))
print(json.dumps({{"get": kael.get_num_threads(), "team": team_size({work})}}))
""")
    assert out == {"get": n, "team": n}


@pytest.mark.parametrize("work", ["loop", "matmul"])
def test_environment_variable_holds_in_every_thread(work):
    n = target_count()
    out = run(f"""
first = in_new_thread(kael.get_num_threads)       # the first thread to ask is not the main one
print(json.dumps({{"first": first, "main": kael.get_num_threads(),
                   "team": in_new_thread(lambda: team_size({work})), "main_team": team_size({work})}}))
""", env={"KAEL_NUM_THREADS": str(n)})
    assert out == {"first": n, "main": n, "team": n, "main_team": n}


def test_changing_the_count_reaches_threads_that_already_ran():
    # oneDNN reads the count from the calling thread's OpenMP setting, which kael updates when the
    # process-wide value changed since that thread last ran an op. The thread's team grows from
    # OpenMP's default to n: its size is the first team's plus the threads the second one adds.
    n = target_count()
    out = run(f"""
import queue
todo, done = queue.Queue(), queue.Queue()
def worker():
    while (job := todo.get()) is not None:
        done.put(job())
t = threading.Thread(target=worker)
t.start()
todo.put(lambda: team_size(matmul))
first = done.get()
kael.set_num_threads({n})
todo.put(lambda: (kael.get_num_threads(), team_size(matmul) - 1))
get, added = done.get()
todo.put(None)
t.join()
print(json.dumps({{"first": first, "get": get, "team": first + added}}))
""")
    assert out["first"] == len(os.sched_getaffinity(0))
    assert out["get"] == n and out["team"] == n


def test_invalid_environment_variable_raises_on_get_but_set_still_works():
    out = run("""
try:
    kael.get_num_threads()
    error = None
except ValueError as e:
    error = str(e)
kael.set_num_threads(2)
print(json.dumps({"error": error, "after": kael.get_num_threads(), "sum": kael.ones(1 << 20).sum().item()}))
""", env={"KAEL_NUM_THREADS": "lots"})
    assert "KAEL_NUM_THREADS: expected an integer in 1..1024, got 'lots'" in out["error"]
    assert out["after"] == 2 and out["sum"] == float(1 << 20)
