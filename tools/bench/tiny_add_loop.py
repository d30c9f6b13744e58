#!/usr/bin/env python3
"""Driver for callgrind_add.sh: `a + b` on 1-element float32 tensors, N times.

    python tools/bench/tiny_add_loop.py LIB N      # LIB in kael|torch|numpy|none

Everything except the loop trip count is identical for every N (imports,
tensor creation, one warm-up `a + b` so lazy first-call initialisation is not
counted), so Ir(N) - Ir(0) is the cost of N steady-state `a + b` statements,
including the Python loop (itertools.repeat, as timeit uses) and the result's
deallocation. LIB=none runs the same loop with an empty body (the bare loop
cost, for reference).
"""
import os
import sys
from itertools import repeat

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"


def make_inputs(lib):
    import numpy as np
    x = np.array([1.5], dtype=np.float32)
    y = np.array([2.25], dtype=np.float32)
    if lib == "numpy":
        return x, y
    if lib == "torch":
        import torch
        torch.set_num_threads(1)
        return torch.from_numpy(x), torch.from_numpy(y)
    if lib == "kael":
        import kael
        kael.set_num_threads(1)
        return kael.tensor(x), kael.tensor(y)
    if lib == "none":
        return None, None
    sys.exit(f"unknown LIB {lib!r} (expected kael, torch, numpy or none)")


def loop_add(a, b, n):
    for _ in repeat(None, n):
        a + b


def loop_empty(a, b, n):
    for _ in repeat(None, n):
        pass


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    lib, n = sys.argv[1], int(sys.argv[2])
    a, b = make_inputs(lib)
    body = loop_empty if lib == "none" else loop_add
    body(a, b, 1)  # warm-up, runs for every N
    body(a, b, n)


if __name__ == "__main__":
    main()
