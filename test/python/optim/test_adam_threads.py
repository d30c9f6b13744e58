"""The fused Adam(W) step and other threads (Note [Concurrency] in kael/core/concurrency.h): a
step over many elements runs without the GIL, over the call's own tensors, so another Python
thread runs meanwhile, and one that swaps a parameter's storage (`p.data = ...`) cannot make the
step write into freed memory."""
import subprocess
import sys
import textwrap

import kael
from helpers import where_the_gil_was_released


def _adam(n):
    p = kael.nn.Parameter(kael.ones(n))
    p.grad = kael.full((n,), 0.5)
    return p, kael.optim.Adam([p], lr=1e-3)


def test_a_large_step_releases_the_gil_and_a_small_one_keeps_it():
    p, opt = _adam(1 << 17)
    where = where_the_gil_was_released(opt.step)
    assert where is not None and where.name == "_fused_update", where  # the _C._adam_step_ call
    small, opt_small = _adam(100)
    assert where_the_gil_was_released(opt_small.step, attempts=50) is None
    # an unlocked step computes what a locked one does: one step from 1 with gradient 0.5 moves by lr
    for n in (1 << 17, 100):
        p, opt = _adam(n)
        opt.step()
        assert abs(p[0].item() - (1 - 1e-3)) < 1e-6 and abs(p[-1].item() - (1 - 1e-3)) < 1e-6


def test_swapping_a_parameter_during_steps_never_crashes():
    code = textwrap.dedent("""
        import threading, kael
        n = 1 << 18
        p = kael.nn.Parameter(kael.ones(n))
        p.grad = kael.ones(n)
        opt = kael.optim.Adam([p], lr=1e-3)
        done = threading.Event()
        kinds = set()

        def swapper():
            for i in range(300):
                m = n if i % 2 else n // 2
                p.data = kael.ones(m)      # a new storage; the old one loses its last reference
                p.grad = kael.ones(m)
            done.set()

        t = threading.Thread(target=swapper)
        t.start()
        while not done.is_set():
            try:
                opt.step()
            except RuntimeError as e:       # the state tensors are of the old shape: torch's error too
                kinds.add(str(e).split(":")[0])
        t.join()
        print("ok", sorted(kinds))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("ok"), proc.stdout
