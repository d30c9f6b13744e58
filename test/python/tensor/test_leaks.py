"""Reference cycles through tensors are collected (Note [Tensor objects and the garbage
collector], csrc/tensor_type.cpp).

Each pattern makes an object that refers to itself through a tensor (its __dict__, a subclass's
slot, a hook's closure, a custom Function's ctx, its .grad, a Module) and drops it, 10,000 times
in a subprocess: every object must be found by the collector (its weak reference's callback
fires) and the resident memory must not grow by more than a few MB (a leaked object holds a
4 KB tensor, so 10,000 leaks would be 40 MB). Other tests check that what C++ still uses
(a graph that runs a hook later, a preserved tensor object) is never collected.

Not collected, as in torch: a cycle through a tensor whose impl C++ also holds (a leaf that
keeps its own graph's output, `t.out = (t * 2).sum()`, whose AccumulateGrad holds the leaf; an
input saved with save_for_backward): its object would be preserved if Python dropped it, so
what it refers to counts as a root.
"""

import gc
import json
import os
import subprocess
import sys
import textwrap
import threading
import weakref

import pytest

import kael

ITERATIONS = 10_000
MAX_GROWTH_MB = 4.0

# Each body defines make() -> an object (or a tuple whose first item is the object whose weak
# reference is watched) that is only reachable through a reference cycle once make returns.
PATTERNS = {
    "hook-closure-on-leaf": """
        def make():
            t = kael.ones(N, requires_grad=True)
            t.register_hook(lambda g: g if t is not None else None)
            return t
    """,
    "hook-closure-on-non-leaf": """
        def make():
            a = kael.ones(N, requires_grad=True)
            t = a * 2
            t.register_hook(lambda g: g if t is not None else None)
            return t
    """,
    "retain-grad-and-hook-closure": """
        def make():
            a = kael.ones(N, requires_grad=True)
            t = a * 2
            t.retain_grad()
            t.register_hook(lambda g: g if t is not None else None)
            return t
    """,
    "self-in-dict": """
        def make():
            t = kael.ones(N)
            t.me = t
            return t
    """,
    "two-tensors-refer-to-each-other": """
        def make():
            a, b = kael.ones(N), kael.ones(N)
            a.other, b.other = b, a
            return a
    """,
    "list-in-own-dict": """
        def make():
            t = kael.ones(N)
            t.items = [1, t]
            return t
    """,
    "subclass-self-reference": """
        class Sub(kael.Tensor):
            pass

        def make():
            t = kael.ones(N).as_subclass(Sub)
            t.me = t
            return t
    """,
    "subclass-slot-self-reference": """
        class Slotted(kael.Tensor):
            __slots__ = ("me",)

        def make():
            t = kael.ones(N).as_subclass(Slotted)
            t.me = t
            return t
    """,
    "function-ctx-stores-output": """
        class Double(kael.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                out = x * 2
                ctx.out = out
                return out

            @staticmethod
            def backward(ctx, g):
                return g * 2

        def make():
            x = kael.ones(N, requires_grad=True)
            return Double.apply(x)
    """,
    "function-ctx-stores-input-and-output": """
        class Scale(kael.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                out = x * 3
                ctx.both = (x, out)
                # (saving x too would make the node share x's impl: x's object would be preserved
                # if dropped, so its __dict__ counts as a root and the cycle stays, as in torch)
                ctx.save_for_backward(out)
                return out

            @staticmethod
            def backward(ctx, g):
                return g * 3

        def make():
            x = kael.ones(N, requires_grad=True) * 1
            out = Scale.apply(x)
            x.result = out
            return out
    """,
    "module-holds-tensor-whose-hook-holds-module": """
        def make():
            m = kael.nn.Linear(N // 16, 16)
            m.weight.register_hook(lambda g: g if m is not None else None)
            return m
    """,
    "module-output-hook-holds-module": """
        def make():
            m = kael.nn.Linear(N // 16, 16)
            out = m(kael.ones(2, N // 16))
            out.register_hook(lambda g: g if m is not None else None)
            m.last = out
            return m
    """,
    "grad-refers-to-its-tensor": """
        def make():
            t = kael.ones(N, requires_grad=True)
            t.grad = kael.ones(N)
            t.grad.owner = t
            return t
    """,
    "grad-from-backward-refers-to-its-tensor": """
        def make():
            t = kael.ones(N, requires_grad=True)
            (t * 2).sum().backward()
            t.grad.owner = t
            return t
    """,
    "view-base-in-dict": """
        def make():
            b = kael.ones(N)
            b.view = b[1:]
            return b
    """,
}

SCRIPT = """
import gc, json, sys, weakref
import kael

N = 1024

{body}

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

alive = set()
collected = [0]

def dead(ref):
    alive.discard(ref)
    collected[0] += 1

def once():
    obj = make()
    alive.add(weakref.ref(obj, dead))

found = [0]  # objects the collector found unreachable, in its automatic runs too

def count(phase, info):
    if phase == "stop":
        found[0] += info["collected"]

for _ in range(500):  # warm up: caches, the allocator, interned names
    once()
gc.collect()
base = rss_mb()
collected[0] = 0
gc.callbacks.append(count)
for i in range({iterations}):
    once()
    if i % 1000 == 999:
        gc.collect()
gc.collect()
found = found[0]
print(json.dumps({{"collected": collected[0], "alive": len(alive), "found": found,
                  "growth_mb": rss_mb() - base}}))
"""


def run_pattern(body, iterations=ITERATIONS):
    code = SCRIPT.format(body=textwrap.dedent(body), iterations=iterations)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_cycle_is_collected(pattern):
    result = run_pattern(PATTERNS[pattern])
    # every object dies (the warm-up's too, hence alive == 0), and the collector is what found them
    assert result["alive"] == 0, result
    assert result["collected"] >= ITERATIONS, result
    assert result["found"] >= ITERATIONS, result
    assert result["growth_mb"] < MAX_GROWTH_MB, result


# ---------------------------------------------------------------- what must not be collected


def collect_and_check_alive(ref):
    for _ in range(3):
        gc.collect()
    return ref() is not None


def test_hook_of_a_dropped_non_leaf_still_runs_when_its_graph_is_used():
    calls = []
    a = kael.tensor([1.0, 2.0, 3.0], requires_grad=True)

    def build():
        b = a * 2

        def hook(g):
            calls.append(tuple(b.shape))  # the closure refers to b: b -> grad_fn -> hook -> b
            return g * 10

        b.register_hook(hook)
        return (b * 3).sum(), weakref.ref(b)

    out, ref = build()
    assert collect_and_check_alive(ref)  # out's graph holds b's node, and with it the hook
    out.backward()
    assert calls == [(3,)]
    assert a.grad.tolist() == [60.0, 60.0, 60.0]
    del out
    gc.collect()
    assert ref() is None


def test_hook_of_a_dropped_leaf_still_runs_when_its_graph_is_used():
    calls = []

    def build():
        a = kael.tensor([1.0, 2.0], requires_grad=True)
        a.tag = "leaf"

        def hook(g):
            calls.append(a.tag)
            return g + 1

        a.register_hook(hook)
        return a * 3

    out = build()
    acc = out.grad_fn.next_functions[0][0]
    gc.collect()
    out.sum().backward()
    assert calls == ["leaf"]
    leaf = acc.variable
    assert leaf.tag == "leaf" and leaf.grad.tolist() == [4.0, 4.0]


def test_function_ctx_cycle_kept_while_its_graph_is_used():
    class Double(kael.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            out = x * 2
            ctx.out = out
            return out

        @staticmethod
        def backward(ctx, g):
            assert ctx.out.shape == g.shape
            return g * 2

    x = kael.ones(3, requires_grad=True)
    y = Double.apply(x)
    z = (y * 5).sum()
    ref = weakref.ref(y)
    del y
    assert collect_and_check_alive(ref)  # z's graph holds y's node
    z.backward()
    assert x.grad.tolist() == [10.0, 10.0, 10.0]
    del z
    gc.collect()
    assert ref() is None


def test_preserved_tensor_in_cycle_keeps_dict_and_hooks():
    calls = []
    def build():
        a = kael.ones(2, requires_grad=True)
        a.me = a
        a.register_hook(lambda g: calls.append(a.me is a))
        return a * 2

    out = build()
    acc = out.grad_fn.next_functions[0][0]
    gc.collect()
    leaf = acc.variable
    assert leaf.me is leaf
    out.sum().backward()
    assert calls == [True]
    # once the graph is gone, the leaf is an ordinary cycle (its __dict__, its hook) and is collected
    ref = weakref.ref(leaf)
    del out, acc, leaf
    gc.collect()
    assert ref() is None


def test_collection_during_backward_on_other_threads():
    """gc.collect() in a loop while other threads build cycles and run backward through them."""
    errors = []
    stop = threading.Event()

    def worker():
        try:
            for _ in range(200):
                a = kael.ones(8, requires_grad=True)
                b = a * 2
                b.register_hook(lambda g, b=b: g * 1)
                b.me = b
                (b * b).sum().backward()
                assert a.grad.tolist() == [8.0] * 8
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    def collector():
        while not stop.is_set():
            gc.collect()

    c = threading.Thread(target=collector)
    c.start()
    workers = [threading.Thread(target=worker) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stop.set()
    c.join()
    assert not errors, errors


def test_leak_check_detects_a_leak():
    """The harness itself: objects that stay alive show as not collected and as memory growth."""
    result = run_pattern("""
        KEEP = []
        def make():
            t = kael.ones(N)
            KEEP.append(t)
            return t
    """, iterations=2000)
    assert result["alive"] > 0 and result["growth_mb"] > 4.0
