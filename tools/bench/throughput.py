#!/usr/bin/env python3
"""Throughput benchmark: kael vs PyTorch (and NumPy where it has the function), side by side,
at 1 and 2 threads.

Run from the repository root with the project venv:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python tools/bench/throughput.py
    .venv/bin/python tools/bench/throughput.py --markdown          # tables for docs/performance.md
    .venv/bin/python tools/bench/throughput.py --quick             # smaller sizes, a smoke run
    .venv/bin/python tools/bench/throughput.py --threads 1 --cases exp,sum
    .venv/bin/python tools/bench/throughput.py --runs 3 --markdown     # median of 3, as in docs/performance.md

Method
------
* One process. Each case builds its inputs once per library (the same float32 data), runs
  one warm-up call, then `--repeats` timed runs (default 7), round-robin across libraries
  so that machine noise hits all of them alike; a run repeats the call until it lasts at
  least 20 ms and reports the time per call. Each cell is the median of the runs.
* Settling: before each timed run the script sleeps `--settle` seconds (default 0.02). torch's
  OpenMP runtime (libgomp) keeps its worker threads spinning for a while after each parallel
  region (GOMP_SPINCOUNT, a few ms by default) before they sleep; in one process that alternates
  libraries, a run that starts right after torch's could share its cores with those spinning
  threads (kael's pool threads spin for at most 0.2 ms after a region, then block on a
  condition variable and take no core). The pause lets every library start its run on a quiet
  machine; torch keeps its own wait policy (nothing is set in its environment). A run right after
  torch's and one after a pause did not differ when checked (docs/performance.md, "Measurements
  moved out of decisions and comments"), so the pause is a safeguard, not a correction.
* Threads: torch.set_num_threads(n) and kael.set_num_threads(n). NumPy's ufuncs are
  single-threaded and its OpenBLAS is pinned to 1 thread (OPENBLAS_NUM_THREADS=1 is set
  before NumPy is imported), so the NumPy column appears in the 1-thread table only.
* Rates: memory-bound cases count the bytes the op must move (inputs read once, outputs
  written once: 8 B per element for a float32 copy or exp, 12 B for add, 4 B for sum) and
  report GB/s; matmul and attention count 2mnk FLOP per product and report GFLOP/s.
  Pointwise ops write into a preallocated result (out=), so page faults of a fresh 64 MB
  result are not measured: this is the kernel's rate.
* `copy` (dst.copy_(src), np.copyto) is the bandwidth reference. kael writes an output of
  half the last-level cache or more with streaming stores (Note [Streaming stores] in
  kael/native/loops.h), so its copy moves 8 B per element where a plain store's read of each
  output line makes 12; kael's copy is the rate at which this machine streams. `% copy` pairs
  each memory-bound case with that copy: kael's 16M copy runs in the case's own round-robin
  (one more runner, `copy alongside`), each round gives the ratio of kael's rate to the copy's
  in that round, and the cell is the median of those ratios. A host whose bandwidth drifts
  (docs/performance.md has a host whose one-core copy moved by half within minutes) then moves the
  case and its reference together, where a ratio to the copy row, measured minutes earlier,
  moved with the drift. The copy row itself still reports each library's copy.
* A case runs for a library only when that library has the op: when kael lacks it (or it
  raises), the script prints '<case>: not available in kael (...)' and goes on, so new ops
  are picked up without editing the script. Each kael result is compared once with torch's
  (a mismatch is printed as a warning).
* Clock: `--clock wall` (the default) times elapsed seconds, what a user sees on an idle
  machine. On a machine shared with other work, elapsed time measures the other work too;
  `--clock cpu` times the process's CPU seconds divided by the thread count instead (the
  kernels' own cost; exact at 1 thread, and at 2 threads when the work splits evenly and the
  idle threads do not spin). Memory bandwidth shared with the other work still counts.
* Targets (printed under the tables): kael >= 0.9x torch on every case, pointwise/sum >= 80%
  of copy bandwidth, exp/log/tanh/sigmoid/erf >= NumPy's throughput.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time

for _v in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import numpy as np  # noqa: E402

N_ELEM = 16 * 1024 * 1024


def lookup(mod, *paths):
    """The first attribute path (dotted) that exists on mod, or None."""
    for path in paths:
        obj = mod
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is not None:
            return obj
    return None


class Case:
    """A benchmark case. build(lib_name, mod, data) returns a zero-argument callable that runs
    the op once (raising AttributeError-free 'NotAvailable' when the library lacks it)."""

    def __init__(self, key, label, unit, amount, build, kind, numpy=None):
        self.key = key
        self.label = label
        self.unit = unit          # "GB/s" or "GFLOP/s"
        self.amount = amount      # bytes or FLOP per call
        self.build = build        # (lib, mod, inputs) -> callable
        self.kind = kind          # "copy", "pointwise", "transcendental", "reduce", "other"
        self.numpy = numpy        # numpy builder or None


class NotAvailable(Exception):
    pass


def need(mod, *paths):
    fn = lookup(mod, *paths)
    if fn is None:
        raise NotAvailable(f"no {' / '.join(paths)}")
    return fn


# ---------------------------------------------------------------------------
# Inputs: one float32 NumPy array per shape, converted per library.
# ---------------------------------------------------------------------------
def convert(lib, mod, arr):
    if lib == "numpy":
        return arr.copy()
    if lib == "torch":
        return mod.from_numpy(arr.copy())
    return mod.tensor(arr)


def make_cases(quick):
    n = N_ELEM // 16 if quick else N_ELEM
    rows, cols = (512, 1024) if quick else (4096, 1024)
    ce_rows, ce_classes = (256, 8192) if quick else (1024, 50257)
    mm = 256 if quick else 1024
    heads, tokens, dims = 8, 256 if quick else 1024, 64
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    xpos = np.abs(x) + np.float32(0.5)
    mat = rng.standard_normal((rows, cols), dtype=np.float32)
    w = rng.standard_normal(cols, dtype=np.float32)
    bias = rng.standard_normal(cols, dtype=np.float32)
    logits = rng.standard_normal((ce_rows, ce_classes), dtype=np.float32)
    target = rng.integers(0, ce_classes, ce_rows).astype(np.int64)
    ma = rng.standard_normal((mm, mm), dtype=np.float32)
    mb = rng.standard_normal((mm, mm), dtype=np.float32)
    sa = rng.standard_normal((64, 512), dtype=np.float32)
    sb = rng.standard_normal((512, 512), dtype=np.float32)
    lin_rows, lin_in, lin_out = (32, 256, 1024) if quick else (128, 1024, 4096)
    lx = rng.standard_normal((lin_rows, lin_in), dtype=np.float32)
    lw = rng.standard_normal((lin_out, lin_in), dtype=np.float32)
    lbias = rng.standard_normal(lin_out, dtype=np.float32)
    q, k, v = (rng.standard_normal((1, heads, tokens, dims), dtype=np.float32) for _ in range(3))

    def unary(fn_paths, src=x, numpy_fn=None):
        def build(lib, mod):
            fn = need(mod, *fn_paths)
            a = convert(lib, mod, src)
            out = convert(lib, mod, np.empty_like(src))
            return lambda: fn(a, out=out), out
        nb = None
        if numpy_fn is not None:
            def nb(lib, mod):
                a = src.copy()
                out = np.empty_like(src)
                return lambda: numpy_fn(a, out=out), out
        return build, nb

    cases = []

    def copy_build(lib, mod):
        a = convert(lib, mod, x)
        out = convert(lib, mod, np.empty_like(x))
        return lambda: out.copy_(a), out

    def copy_numpy(lib, mod):
        a = x.copy()
        out = np.empty_like(x)
        return lambda: np.copyto(out, a), out
    cases.append(Case("copy", f"copy, {n // 2**20}M f32", "GB/s", 8 * n, copy_build, "copy", copy_numpy))

    def add_build(lib, mod):
        a, b = convert(lib, mod, x), convert(lib, mod, y)
        out = convert(lib, mod, np.empty_like(x))
        return lambda: mod.add(a, b, out=out), out

    def add_numpy(lib, mod):
        a, b, out = x.copy(), y.copy(), np.empty_like(x)
        return lambda: np.add(a, b, out=out), out
    cases.append(Case("add", f"add(a, b, out=), {n // 2**20}M f32", "GB/s", 12 * n, add_build, "pointwise",
                      add_numpy))

    for key, paths, src, npfn in (
            ("exp", ("exp",), x, np.exp),
            ("log", ("log",), xpos, np.log),
            ("tanh", ("tanh",), x, np.tanh),
            ("sigmoid", ("sigmoid",), x, None),
            ("erf", ("erf", "special.erf"), x, None),
            ("expm1", ("expm1",), x, np.expm1),
            ("log1p", ("log1p",), xpos, np.log1p)):
        build, nb = unary(paths, src, npfn)
        cases.append(Case(key, f"{key}(a, out=), {n // 2**20}M f32", "GB/s", 8 * n, build, "transcendental", nb))

    def gelu_build(lib, mod):
        fn = need(mod, "nn.functional.gelu", "gelu")
        a = convert(lib, mod, x)
        return lambda: fn(a), None
    cases.append(Case("gelu", f"gelu(a), {n // 2**20}M f32", "GB/s", 8 * n, gelu_build, "transcendental"))

    def gelu_tanh_build(lib, mod):
        fn = need(mod, "nn.functional.gelu", "gelu")
        a = convert(lib, mod, x)
        return lambda: fn(a, approximate="tanh"), None
    cases.append(Case("gelu_tanh", f"gelu(a, approximate='tanh'), {n // 2**20}M f32", "GB/s", 8 * n, gelu_tanh_build,
                      "transcendental"))

    def sum_build(lib, mod):
        a = convert(lib, mod, x)
        return lambda: a.sum(), None

    def sum_numpy(lib, mod):
        a = x.copy()
        return lambda: a.sum(), None
    cases.append(Case("sum", f"a.sum(), {n // 2**20}M f32", "GB/s", 4 * n, sum_build, "reduce", sum_numpy))

    def lse_build(lib, mod):
        fn = need(mod, "logsumexp")
        a = convert(lib, mod, x)
        return lambda: fn(a, 0), None
    cases.append(Case("logsumexp", f"logsumexp(a, 0), {n // 2**20}M f32", "GB/s", 4 * n, lse_build, "reduce"))

    def softmax_build(lib, mod):
        fn = need(mod, "softmax", "nn.functional.softmax")
        a = convert(lib, mod, mat)
        return lambda: fn(a, -1), None
    cases.append(Case("softmax", f"softmax(a, -1), ({rows}, {cols}) f32", "GB/s", 8 * rows * cols,
                      softmax_build, "other"))

    def ln_build(lib, mod):
        fn = need(mod, "nn.functional.layer_norm", "layer_norm")
        a, ww, bb = convert(lib, mod, mat), convert(lib, mod, w), convert(lib, mod, bias)
        return lambda: fn(a, (cols,), ww, bb, 1e-5), None
    cases.append(Case("layer_norm", f"layer_norm, ({rows}, {cols}) f32", "GB/s", 8 * rows * cols, ln_build,
                      "other"))

    def ce_build(lib, mod):
        a, t = convert(lib, mod, logits), convert(lib, mod, target)
        if lib == "torch":
            fn = mod.nn.functional.cross_entropy
            return lambda: fn(a, t, reduction="none"), None
        fn = need(mod, "cross_entropy_losses", "nn.functional.cross_entropy_losses")
        return lambda: fn(a, t), None
    cases.append(Case("cross_entropy", f"cross-entropy losses, ({ce_rows}, {ce_classes}) f32", "GB/s",
                      4 * ce_rows * ce_classes, ce_build, "other"))

    def mm_build(lhs, rhs):
        def build(lib, mod):
            a, b = convert(lib, mod, lhs), convert(lib, mod, rhs)
            return lambda: a @ b, None

        def numpy_build(lib, mod):
            a, b = lhs.copy(), rhs.copy()
            return lambda: a @ b, None
        return build, numpy_build
    b1, n1 = mm_build(ma, mb)
    cases.append(Case("matmul", f"matmul {mm}^3 f32", "GFLOP/s", 2 * mm ** 3, b1, "other", n1))
    b2, n2 = mm_build(sa, sb)
    cases.append(Case("matmul_small", "matmul (64,512)x(512,512) f32", "GFLOP/s", 2 * 64 * 512 * 512, b2,
                      "other", n2))

    def linear_build(lib, mod):
        # x @ w.t() + bias: the weight transposed, as nn.Linear multiplies
        fn = need(mod, "nn.functional.linear")
        a, ww, bb = convert(lib, mod, lx), convert(lib, mod, lw), convert(lib, mod, lbias)
        return lambda: fn(a, ww, bb), None
    cases.append(Case("linear", f"linear ({lin_rows},{lin_in})x({lin_out},{lin_in})^T + bias f32", "GFLOP/s",
                      2 * lin_rows * lin_in * lin_out, linear_build, "other"))

    def attn_build(lib, mod):
        fn = need(mod, "nn.functional.scaled_dot_product_attention", "scaled_dot_product_attention")
        qq, kk, vv = (convert(lib, mod, t) for t in (q, k, v))
        return lambda: fn(qq, kk, vv), None
    cases.append(Case("attention", f"attention ({heads} heads, {tokens} tokens, {dims} dims) f32", "GFLOP/s",
                      4 * heads * tokens * tokens * dims, attn_build, "other"))
    return cases


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------
CLOCK = time.perf_counter
CLOCK_DIVISOR = 1
SETTLE_S = 0.02


PCT_KINDS = ("pointwise", "transcendental", "reduce")  # the cases measured against copy
ALONGSIDE = "copy alongside"  # the runner of kael's copy in such a case's round-robin


def time_call(fn, min_s=0.02):
    """Seconds per call: the call is repeated until the run lasts at least min_s."""
    reps = 1
    while True:
        t0 = CLOCK()
        for _ in range(reps):
            fn()
        dt = (CLOCK() - t0) / CLOCK_DIVISOR
        if dt >= min_s:
            return dt / reps
        reps = max(reps * 2, int(reps * min_s / max(dt, 1e-9)) + 1)


def to_numpy(v, limit=1 << 16):
    """The first `limit` elements (flattened) as a float64 NumPy array."""
    if v is None:
        return None
    if isinstance(v, np.ndarray):
        return v.reshape(-1)[:limit].astype(np.float64)
    if type(v).__module__.startswith("torch"):
        return v.detach().reshape(-1)[:limit].double().numpy()
    return np.asarray(v.reshape(-1)[:limit].tolist(), dtype=np.float64)


def compare(kael_out, torch_out, key):
    a, b = to_numpy(kael_out), to_numpy(torch_out)
    if a is None or b is None:
        return None
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if tuple(kael_out.shape) != tuple(torch_out.shape):
        return f"{key}: kael's shape {tuple(kael_out.shape)} differs from torch's {tuple(torch_out.shape)}"
    tol = 1e-2 if key.startswith(("matmul", "linear", "attention", "sum", "logsumexp")) else 1e-4
    if not np.allclose(a, b, rtol=tol, atol=tol, equal_nan=True):
        return f"{key}: kael's result differs from torch's (max abs diff {np.nanmax(np.abs(a - b)):.3g})"
    return None


def run(cases, libs, threads, repeats, warnings, skipped):
    """results[(case.key, lib)] = rate (median over repeats)."""
    results = {}
    global CLOCK_DIVISOR
    CLOCK_DIVISOR = threads if CLOCK is time.process_time else 1
    for lib, mod in libs.items():
        if lib == "torch":
            mod.set_num_threads(threads)
        elif lib == "kael":
            mod.set_num_threads(threads)
    copy_case = next((c for c in cases if c.kind == "copy"), None)
    for case in cases:
        runners = {}
        outputs = {}
        for lib, mod in libs.items():
            if lib == "numpy" and (threads != 1 or case.numpy is None):
                continue
            builder = case.numpy if lib == "numpy" else case.build
            try:
                fn, out = builder(lib, mod)
                res = fn()  # warm-up (and the result to compare)
                outputs[lib] = out if out is not None else res
                runners[lib] = fn
            except NotAvailable as e:
                if lib == "kael":
                    line = f"{case.key}: not available in kael ({e})"
                    if line not in skipped:
                        print(line)
                    skipped.add(line)
            except Exception as e:  # noqa: BLE001 - a benchmark reports and goes on
                if lib == "kael":
                    line = f"{case.key}: not available in kael ({type(e).__name__}: {str(e).splitlines()[0][:100]})"
                    if line not in skipped:
                        print(line)
                    skipped.add(line)
                else:
                    warnings.append(f"{case.key}: {lib} failed: {type(e).__name__}: {e}")
        if "kael" in outputs and "torch" in outputs and threads == 1:
            msg = compare(outputs["kael"], outputs["torch"], case.key)
            if msg:
                warnings.append(msg)
        if case.kind in PCT_KINDS and "kael" in runners and copy_case is not None:
            ref, _ = copy_case.build("kael", libs["kael"])
            ref()  # warm-up
            runners[ALONGSIDE] = ref
        samples = {lib: [] for lib in runners}
        order = list(runners)
        for r in range(repeats):
            for lib in order[r % len(order):] + order[:r % len(order)]:
                if SETTLE_S:
                    time.sleep(SETTLE_S)
                samples[lib].append(time_call(runners[lib]))
        ref_ts = samples.pop(ALONGSIDE, None)
        for lib, ts in samples.items():
            results[(case.key, lib)] = case.amount / statistics.median(ts) / 1e9
        if ref_ts:
            # each round's kael rate over the copy's rate in the same round
            results[(case.key, "% copy")] = statistics.median(
                (case.amount / tk) / (copy_case.amount / tc) for tk, tc in zip(samples["kael"], ref_ts))
    return results


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------
def fmt(v):
    if v is None:
        return "—"
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "—"
    return f"{a / b:.2f}x"


def report(cases, results, threads, markdown, have_numpy, misses):
    header = ["case", "unit", "kael", "torch"] + (["numpy"] if have_numpy else []) + ["kael/torch"] + \
        (["kael/numpy"] if have_numpy else []) + ["kael % copy"]
    rows = []
    for case in cases:
        k = results.get((case.key, "kael"))
        t = results.get((case.key, "torch"))
        nmp = results.get((case.key, "numpy")) if have_numpy else None
        if k is None and t is None:
            continue
        pct = "—"
        frac = results.get((case.key, "% copy"))
        if frac is not None:
            pct = f"{100 * frac:.0f}%"
            if frac < 0.8:
                misses.append(f"{threads} thread(s): {case.key} at {pct} of copy bandwidth (target 80%)")
        if k is not None and t is not None and k < 0.9 * t:
            misses.append(f"{threads} thread(s): {case.key} at {k / t:.2f}x torch (target 0.9x)")
        if case.kind == "transcendental" and k is not None and nmp is not None and k < nmp:
            misses.append(f"{threads} thread(s): {case.key} at {k / nmp:.2f}x NumPy (target 1.0x)")
        row = [case.label, case.unit, fmt(k), fmt(t)] + ([fmt(nmp)] if have_numpy else []) + [ratio(k, t)] + \
            ([ratio(k, nmp)] if have_numpy else []) + [pct]
        rows.append(row)
    title = f"{threads} thread{'s' if threads > 1 else ''}"
    if markdown:
        print(f"\n{title} (higher is better; median of the runs)\n")
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
        print(f"\n== {title} (higher is better; median of the runs)")
        print("  ".join(h.ljust(widths[i]) if i == 0 else h.rjust(widths[i]) for i, h in enumerate(header)))
        for row in rows:
            print("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    ap.add_argument("--repeats", type=int, default=7, help="timed runs per case and library (median)")
    ap.add_argument("--runs", type=int, default=1,
                    help="whole measurements per thread count; each cell is the median of the runs' medians")
    ap.add_argument("--cases", default="", help="comma-separated case keys (default: all)")
    ap.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    ap.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall: elapsed time (an idle machine); cpu: the process's CPU time over the "
                         "thread count, for a machine shared with other work (see the docstring)")
    ap.add_argument("--settle", type=float, default=0.02,
                    help="seconds to sleep before each timed run, so that no library's idle threads "
                         "(OpenMP's spin after a region) still hold a core (see the docstring)")
    ap.add_argument("--fail-on-miss", action="store_true", help="exit with status 2 when a target is missed")
    args = ap.parse_args()

    global CLOCK, SETTLE_S
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    SETTLE_S = max(0.0, args.settle)
    import torch
    import kael
    libs = {"kael": kael, "torch": torch, "numpy": np}
    cases = make_cases(args.quick)
    if args.cases:
        wanted = set(args.cases.split(","))
        unknown = wanted - {c.key for c in cases}
        if unknown:
            ap.error(f"unknown case(s): {', '.join(sorted(unknown))}")
        cases = [c for c in cases if c.key in wanted or c.key == "copy"]
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    try:
        load = os.getloadavg()
        load_s = f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min) at start"
    except OSError:
        load_s = "load average unknown"
    print(f"# kael throughput benchmark ({'quick' if args.quick else 'full'} run, {now})")
    print(f"# {platform.machine()}, {os.cpu_count()} logical cores, {platform.system()} {platform.release()}; {load_s}")
    print(f"# kael {getattr(kael, '__version__', '?')}, torch {torch.__version__}, numpy {np.__version__}, "
          f"python {platform.python_version()}; median of {args.runs} measurement(s) of {args.repeats} runs each; "
          f"{args.clock} clock; {SETTLE_S:g} s settle before each run")
    warnings, misses, skipped = [], [], set()
    for threads in (int(t) for t in args.threads.split(",")):
        runs = [run(cases, libs, threads, args.repeats, warnings, skipped) for _ in range(args.runs)]
        results = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        report(cases, results, threads, args.markdown, threads == 1, misses)
    if warnings:
        print("\nwarnings:")
        for w in dict.fromkeys(warnings):
            print(f"  {w}")
    print("\ntargets: kael >= 0.9x torch, pointwise/sum >= 80% of copy, transcendental >= NumPy")
    if misses:
        for m in misses:
            print(f"  MISS {m}")
    else:
        print("  all met")
    try:
        load = os.getloadavg()
        print(f"load average at the end: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")
    except OSError:
        pass
    return 2 if (misses and args.fail_on_miss) else 0


if __name__ == "__main__":
    sys.exit(main())
