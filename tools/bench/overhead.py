#!/usr/bin/env python3
"""Side-by-side overhead and throughput benchmark: kael vs PyTorch vs NumPy.

Run from the repository root with the project venv:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python tools/bench/overhead.py
    .venv/bin/python tools/bench/overhead.py --quick            # fast smoke run
    .venv/bin/python tools/bench/overhead.py --markdown         # tables as Markdown
    .venv/bin/python tools/bench/overhead.py --no-kael          # torch + numpy only

OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (if set in the environment) make NumPy's
OpenBLAS pick a slower kernel; they are read when OpenBLAS is loaded, so they
must be removed before the process starts (``env -u ...``), not inside it.

Method
------
* Everything runs in one process at 1 thread: torch.set_num_threads(1),
  kael.set_num_threads(1), and OPENBLAS/OMP/MKL_NUM_THREADS=1 are put in
  os.environ before numpy is imported.
* Per-call cases: each statement (e.g. ``a + b``) is compiled into a timeit
  loop (no extra Python function call per iteration) and run in batches of N
  calls, N calibrated so one batch takes ~20 ms. R repeats (default 20) are
  taken round-robin across libraries (the library order rotates every repeat)
  so machine noise hits all of them alike; the reported value is the median
  per-call time.  The figures include the bare loop cost (printed in the
  header, typically a few ns), exactly as a Python user would see it.
* Throughput cases: one call per run, warm-up first, median over 7 runs,
  again round-robin across libraries.
* A library that lacks an op (or raises) gets "n/a" in that cell; the reason
  is listed under the tables.

Exit status is 0 unless --fail-on-miss is given and a target is missed.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
import timeit

# ---------------------------------------------------------------------------
# Thread pinning: must happen before numpy (OpenBLAS) / torch are imported.
# ---------------------------------------------------------------------------
_THREAD_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
_SLOW_BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
if "numpy" in sys.modules:  # pragma: no cover - only if imported as a module
    print("warning: numpy was imported before overhead.py set *_NUM_THREADS=1",
          file=sys.stderr)
for _v in _THREAD_ENV:
    os.environ[_v] = "1"

import numpy as np  # noqa: E402


# ---------------------------------------------------------------------------
# Library adapters
# ---------------------------------------------------------------------------
class Lib:
    """Thin adapter: how to build inputs for a library and what it is called."""

    def __init__(self, name, mod, from_numpy):
        self.name = name
        self.mod = mod
        self.from_numpy = from_numpy  # numpy array -> library tensor

    def version(self):
        return getattr(self.mod, "__version__", "unknown")


def load_libs(no_kael: bool):
    libs = {}
    errors = []
    if not no_kael:
        try:
            import kael  # noqa: F401
        except Exception as e:  # ImportError, or a broken extension
            print(f"error: cannot import kael ({type(e).__name__}: {e}).\n"
                  f"       Build it first, or pass --no-kael.", file=sys.stderr)
            sys.exit(1)
        try:
            kael.set_num_threads(1)
        except Exception as e:
            errors.append(f"kael.set_num_threads(1) failed: {type(e).__name__}: {e}")
        libs["kael"] = Lib("kael", kael, lambda arr: kael.tensor(arr))

    import torch
    torch.set_num_threads(1)
    libs["torch"] = Lib("torch", torch, lambda arr: torch.from_numpy(arr.copy()))

    libs["numpy"] = Lib("numpy", np, lambda arr: arr.copy())
    return libs, errors


# ---------------------------------------------------------------------------
# Environment / machine description
# ---------------------------------------------------------------------------
def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def openblas_info():
    """Core name / thread count of the OpenBLAS numpy loaded, via ctypes."""
    import ctypes
    paths = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split()[-1]
                base = os.path.basename(p).lower()
                if "openblas" in base and (base.endswith(".so") or ".so." in base):
                    paths.add(p)
    except OSError:
        return None
    for p in sorted(paths):
        try:
            lib = ctypes.CDLL(p)
        except OSError:
            continue
        out = {"lib": os.path.basename(p)}
        for sym in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
                    "openblas_get_corename64_", "openblas_get_corename"):
            fn = getattr(lib, sym, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                out["core"] = fn().decode()
                break
        for sym in ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
                    "openblas_get_num_threads64_", "openblas_get_num_threads"):
            fn = getattr(lib, sym, None)
            if fn is not None:
                fn.restype = ctypes.c_int
                out["threads"] = fn()
                break
        return out
    return None


def numpy_blas_name():
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg["Build Dependencies"]["blas"]
        return f'{blas.get("name")} {blas.get("version", "")}'.strip()
    except Exception:
        return "unknown"


def torch_blas_name(torch):
    try:
        cfg = torch.__config__.show()
        for key in ("BLAS_INFO=",):
            i = cfg.find(key)
            if i >= 0:
                return cfg[i + len(key):].split(",")[0]
    except Exception:
        pass
    return "unknown"


def print_header(libs, args, loop_ns, notes):
    p = print
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    if args.markdown:
        p("```")
    p(f"# kael overhead benchmark  ({'quick' if args.quick else 'full'} run, {now})")
    p(f"machine : {cpu_model()}, {os.cpu_count()} logical cores "
      f"({affinity} usable), {platform.system()} {platform.release()}")
    p(f"python  : {platform.python_version()} ({sys.executable})")
    vers = []
    for lib in libs.values():
        v = lib.version()
        if lib.name == "torch":
            v += f" [BLAS {torch_blas_name(lib.mod)}, threads={lib.mod.get_num_threads()}]"
        elif lib.name == "numpy":
            ob = openblas_info()
            extra = f"BLAS {numpy_blas_name()}"
            if ob:
                extra += f", core={ob.get('core', '?')}, threads={ob.get('threads', '?')}"
            v += f" [{extra}]"
        elif lib.name == "kael":
            try:
                v += f" [threads={lib.mod.get_num_threads()}]"
            except Exception:
                pass
        vers.append(f"{lib.name} {v}")
    p("libs    : " + "; ".join(vers))
    p(f"method  : per-call = median of {args.repeats} round-robin batches of ~"
      f"{args.batch_ms:g} ms; throughput = median of {args.runs} runs; 1 thread; "
      f"empty-loop cost {loop_ns:.1f} ns/iter (included)")
    slow = [f"{v}={os.environ[v]}" for v in _SLOW_BLAS_ENV if v in os.environ]
    if slow:
        exe = sys.executable
        rel = os.path.relpath(exe)
        exe = rel if not rel.startswith("..") else exe
        p(f"WARNING : {' '.join(slow)} set: numpy's OpenBLAS may use a slower kernel "
          f"(it reads them at load time). Rerun with:\n"
          f"          env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE {exe} {' '.join(sys.argv)}")
    for n in notes:
        p(f"WARNING : {n}")
    if args.markdown:
        p("```")
    p()


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------
# A per-call case: (row label, {lib: (stmt, setup(lib, rng) -> namespace)}).
# A lib missing from the dict gets "—" (no equivalent op).  The "approx" set
# marks libraries whose statement is not the same op (footnoted, no ratio).
def _inputs(lib, shapes, seed=0):
    rng = np.random.default_rng(seed)
    arrs = [rng.random(s, dtype=np.float32) for s in shapes]
    return arrs, [lib.from_numpy(a) for a in arrs]


def _ns_ab(n):
    def setup(lib):
        arrs, (a, b) = _inputs(lib, [n, n])
        return {"a": a, "b": b, "_ref": arrs}
    return setup


def _ns_a(n):
    def setup(lib):
        arrs, (a,) = _inputs(lib, [n])
        return {"a": a, "_ref": arrs}
    return setup


def _ns_mm(n):
    def setup(lib):
        arrs, (a, b) = _inputs(lib, [(n, n), (n, n)])
        return {"a": a, "b": b, "_ref": arrs}
    return setup


class Case:
    def __init__(self, key, label, stmts, setup, ref=None, approx=(), note=None):
        self.key = key
        self.label = label
        self.stmts = stmts        # lib name -> statement
        self.setup = setup        # lib -> namespace dict
        self.ref = ref            # list of numpy inputs -> expected result
        self.approx = set(approx)
        self.note = note


def per_call_cases():
    same = lambda s: {"kael": s, "torch": s, "numpy": s}  # noqa: E731
    return [
        Case("add1", "a + b  (1 elem)", same("a + b"), _ns_ab(1),
             ref=lambda r: r[0] + r[1]),
        Case("add100", "a + b  (100 elem)", same("a + b"), _ns_ab(100),
             ref=lambda r: r[0] + r[1]),
        Case("adds100", "a + 1.0  (100 elem)", same("a + 1.0"), _ns_a(100),
             ref=lambda r: r[0] + 1.0),
        Case("sum100", "a.sum()  (100 elem)", same("a.sum()"), _ns_a(100),
             ref=lambda r: r[0].sum(dtype=np.float64)),
        Case("addalpha", "add(a, b, alpha=2)  (100 elem)",
             {"kael": "add(a, b, alpha=2)", "torch": "add(a, b, alpha=2)",
              "numpy": "a + 2 * b"},
             lambda lib: dict(_ns_ab(100)(lib), add=lib.mod.add),
             ref=lambda r: r[0] + 2 * r[1], approx=("numpy",),
             note="numpy runs `a + 2 * b` (two ops, a temporary): not the same op, no ratio"),
        Case("view", "a.view(10, 10)  (100 elem)",
             {"kael": "a.view(10, 10)", "torch": "a.view(10, 10)",
              "numpy": "a.reshape(10, 10)"}, _ns_a(100),
             ref=lambda r: r[0].reshape(10, 10),
             note="numpy runs `a.reshape(10, 10)` (returns a view)"),
        Case("zeros", "zeros(100)",
             {"kael": "zeros(100)", "torch": "zeros(100)",
              "numpy": "zeros(100, dtype=float32)"},
             lambda lib: {"zeros": lib.mod.zeros, "float32": np.float32},
             ref=lambda r: np.zeros(100, dtype=np.float32),
             note="numpy runs `np.zeros(100, dtype=np.float32)`"),
        Case("mm8", "a @ b  (8x8 matmul)", same("a @ b"), _ns_mm(8),
             ref=lambda r: r[0].astype(np.float64) @ r[1]),
    ]


def throughput_cases(n_elem, n_mm):
    gb = lambda nbytes: (lambda t: nbytes / t / 1e9)  # noqa: E731
    same = lambda s: {"kael": s, "torch": s, "numpy": s}  # noqa: E731
    return [
        Case("add_bw", f"add a + b, {n_elem / 2**20:g}M f32 [GB/s]", same("a + b"),
             _ns_ab(n_elem), ref=lambda r: r[0] + r[1]),
        Case("addout_bw", f"add(a, b, out=c), {n_elem / 2**20:g}M f32 [GB/s]",
             same("add(a, b, out=c)"),
             lambda lib: dict(_ns_ab(n_elem)(lib), add=lib.mod.add,
                              c=lib.from_numpy(np.zeros(n_elem, dtype=np.float32))),
             ref=lambda r: r[0] + r[1],
             note="`add(a, b, out=c)` is informational (no target): it shows kernel "
                  "bandwidth without the cost of faulting in a fresh 3 x N-byte result"),
        Case("sum_bw", f"sum a.sum(), {n_elem / 2**20:g}M f32 [GB/s]", same("a.sum()"),
             _ns_a(n_elem), ref=lambda r: r[0].sum(dtype=np.float64)),
        Case("mm_flops", f"matmul {n_mm}^3 f32 [GFLOP/s]", same("a @ b"), _ns_mm(n_mm),
             ref=lambda r: r[0].astype(np.float64) @ r[1]),
    ], {
        "add_bw": gb(3 * 4 * n_elem),
        "addout_bw": gb(3 * 4 * n_elem),
        "sum_bw": gb(4 * n_elem),
        "mm_flops": lambda t: 2.0 * n_mm ** 3 / t / 1e9,
    }


# ---------------------------------------------------------------------------
# Result checking (best effort: a wrong kernel should not look fast silently)
# ---------------------------------------------------------------------------
def to_numpy(x):
    for conv in (lambda v: v.numpy(), np.asarray, lambda v: np.array(v.tolist()),
                 lambda v: np.array(v.item())):
        try:
            out = np.asarray(conv(x))
            if out.dtype != object:
                return out
        except Exception:
            continue
    return None


def check_result(case, lib, ns, stmt, warnings):
    if case.ref is None or lib.name in case.approx:
        return
    try:
        got = eval(stmt, {}, ns)
    except Exception:
        return  # the timing run will report the error
    arr = to_numpy(got)
    if arr is None:
        return
    exp = np.asarray(case.ref(ns["_ref"]) if "_ref" in ns else case.ref(None))
    if arr.shape != exp.shape and arr.size == exp.size == 1:
        arr = arr.reshape(exp.shape)
    if arr.shape != exp.shape:
        warnings.append(f"{lib.name}: {case.key}: result shape {arr.shape}, expected {exp.shape}")
        return
    dt = getattr(got, "dtype", None)
    if dt is not None and "float32" not in str(dt):
        warnings.append(f"{lib.name}: {case.key}: result dtype {dt}, expected float32")
    err = np.max(np.abs(arr.astype(np.float64) - exp)) / max(1e-30, np.max(np.abs(exp)))
    if not np.isfinite(err) or err > 1e-4:
        warnings.append(f"{lib.name}: {case.key}: max rel. error {err:.2e} vs float64 reference")


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------
def short_err(e):
    s = f"{type(e).__name__}: {e}".splitlines()[0]
    return s if len(s) < 110 else s[:107] + "..."


def make_timer(stmt, ns):
    return timeit.Timer(stmt, globals=ns, timer=time.perf_counter_ns)


def calibrate(timer, target_ns):
    n = 1
    while True:
        t = timer.timeit(n)
        if t >= target_ns / 10 or n >= 1 << 24:
            return max(1, int(n * target_ns / max(t, 1)))
        n *= 10


def run_per_call(cases, libs, args, errors, warnings):
    results = {}  # (case key, lib) -> median ns/call, or an error string
    target = args.batch_ms * 1e6
    for case in cases:
        active = []
        for lib in libs.values():
            stmt = case.stmts.get(lib.name)
            if stmt is None:
                continue
            try:
                ns = case.setup(lib)
                check_result(case, lib, ns, stmt, warnings)
                timer = make_timer(stmt, ns)
                n = calibrate(timer, target)
                active.append((lib.name, timer, n))
            except Exception as e:
                results[(case.key, lib.name)] = "n/a"
                errors.append(f"{lib.name}: {case.label.split('  (')[0]}: {short_err(e)}")
        samples = {name: [] for name, _, _ in active}
        for r in range(args.repeats):
            k = r % max(1, len(active))
            for name, timer, n in active[k:] + active[:k]:
                samples[name].append(timer.timeit(n) / n)
        for name, s in samples.items():
            results[(case.key, name)] = statistics.median(s)
        if args.verbose:
            print(f"  {case.label}: " + ", ".join(
                f"{n}={results[(case.key, n)]:.1f}ns" for n in samples), file=sys.stderr)
    return results


def run_throughput(cases, rate_fns, libs, args, errors, warnings):
    results = {}
    for case in cases:
        active = []
        for lib in libs.values():
            stmt = case.stmts.get(lib.name)
            if stmt is None:
                continue
            try:
                ns = case.setup(lib)
                timer = make_timer(stmt, ns)
                timer.timeit(1)  # warm-up (page faults, lazy init, caches)
                check_result(case, lib, ns, stmt, warnings)
                timer.timeit(1)
                active.append((lib.name, timer, ns))
            except Exception as e:
                results[(case.key, lib.name)] = "n/a"
                errors.append(f"{lib.name}: {case.label.rsplit(',', 1)[0]}: {short_err(e)}")
        samples = {name: [] for name, _, _ in active}
        for r in range(args.runs):
            k = r % max(1, len(active))
            for name, timer, _ in active[k:] + active[:k]:
                samples[name].append(timer.timeit(1))
        for name, s in samples.items():
            results[(case.key, name)] = rate_fns[case.key](statistics.median(s) * 1e-9)
        del active, samples  # free the big inputs before the next case
    return results


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------
LIB_ORDER = ("kael", "torch", "numpy")


def fmt_val(v, digits):
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    if digits == "ns":
        return f"{v:,.1f}" if v < 100 else f"{v:,.0f}"
    return f"{v:,.1f}"


def fmt_ratio(x, y):
    if isinstance(x, (int, float)) and isinstance(y, (int, float)) and y > 0:
        return f"{x / y:.2f}x"
    return "n/a" if ("n/a" in (x, y)) else "—"


def print_table(title, header, rows, markdown):
    print(title)
    if markdown:
        print()
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
        for r in rows:
            print("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
    else:
        w = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
        line = lambda r: "  ".join(  # noqa: E731
            (str(c).ljust(w[i]) if i == 0 else str(c).rjust(w[i])) for i, c in enumerate(r))
        print(line(header))
        print("  ".join("-" * x for x in w))
        for r in rows:
            print(line(r))
    print()


def table_header(libs):
    cols = ["case"] + [n for n in LIB_ORDER if n in libs]
    if "kael" in libs:
        cols += ["kael/torch", "kael/numpy"]
    return cols


def build_rows(cases, results, libs, digits):
    rows = []
    for c in cases:
        vals = {}
        row = [c.label]
        for n in LIB_ORDER:
            if n not in libs:
                continue
            v = results.get((c.key, n))
            vals[n] = v
            cell = fmt_val(v, digits)
            if n in c.approx and v is not None:
                cell += "*"
            row.append(cell)
        if "kael" in libs:
            row.append(fmt_ratio(vals["kael"], vals["torch"]))
            row.append("—" if "numpy" in c.approx else fmt_ratio(vals["kael"], vals["numpy"]))
        rows.append(row)
    return rows


TARGETS = [
    # (description, case key, other lib, kind, bound)
    ("tiny a + b time <= 0.25x torch", "add1", "torch", "time", 0.25),
    ("tiny a + b time <= 1.2x numpy", "add1", "numpy", "time", 1.2),
    ("add(alpha=2) time <= 0.3x torch", "addalpha", "torch", "time", 0.3),
    ("matmul GFLOP/s >= 0.9x torch", "mm_flops", "torch", "rate", 0.9),
    ("add GB/s >= 0.9x torch", "add_bw", "torch", "rate", 0.9),
    ("sum GB/s >= 0.9x torch", "sum_bw", "torch", "rate", 0.9),
]


def check_targets(results, have_kael, markdown):
    if not have_kael:
        print("Targets: skipped (no kael)")
        return 0
    rows, misses = [], 0
    for desc, key, other, kind, bound in TARGETS:
        k, o = results.get((key, "kael")), results.get((key, other))
        if k is None and o is None:
            rows.append([desc, "—", "skipped"])
            continue
        if not isinstance(k, (int, float)) or not isinstance(o, (int, float)) or o <= 0:
            rows.append([desc, "n/a", "MISS (not measured)"])
            misses += 1
            continue
        ratio = k / o
        ok = ratio <= bound if kind == "time" else ratio >= bound
        misses += not ok
        rows.append([desc, f"{ratio:.2f}x", "PASS" if ok else "MISS"])
    print_table("Targets (kael relative to reference):", ["target", "measured", "result"],
                rows, markdown)
    return misses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="fast smoke run: fewer repeats, 1M-element / 256^3 throughput cases")
    ap.add_argument("--markdown", action="store_true", help="print tables as Markdown")
    ap.add_argument("--no-kael", action="store_true", help="benchmark torch and numpy only")
    ap.add_argument("--repeats", type=int, help="per-call repeats (default 20, quick 5)")
    ap.add_argument("--batch-ms", type=float, help="per-call batch duration (default 20, quick 2)")
    ap.add_argument("--runs", type=int, help="throughput runs (default 7, quick 3)")
    ap.add_argument("--elements", type=int, help="throughput add/sum size (default 16M, quick 1M)")
    ap.add_argument("--mm", type=int, help="throughput matmul size (default 1024, quick 256)")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--fail-on-miss", action="store_true",
                    help="exit with status 2 if any target is missed")
    ap.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    args = ap.parse_args()
    q = args.quick
    args.repeats = args.repeats or (5 if q else 20)
    args.batch_ms = args.batch_ms or (2.0 if q else 20.0)
    args.runs = args.runs or (3 if q else 7)
    args.elements = args.elements or ((1 << 20) if q else (16 << 20))
    args.mm = args.mm or (256 if q else 1024)

    libs, errors = load_libs(args.no_kael)
    warnings = []
    empty = make_timer("pass", {})
    loop_ns = min(empty.timeit(1_000_000) / 1_000_000 for _ in range(3))
    print_header(libs, args, loop_ns, errors)
    errors = []

    pc_cases = per_call_cases()
    pc = run_per_call(pc_cases, libs, args, errors, warnings)
    print_table("Per-call latency, ns/call (median; lower is better; ratio = kael time / other time)",
                table_header(libs), build_rows(pc_cases, pc, libs, "ns"), args.markdown)

    results = dict(pc)
    if not args.skip_throughput:
        tp_cases, rate_fns = throughput_cases(args.elements, args.mm)
        tp = run_throughput(tp_cases, rate_fns, libs, args, errors, warnings)
        print_table("Throughput at 1 thread (median; higher is better; ratio = kael rate / other rate)",
                    table_header(libs), build_rows(tp_cases, tp, libs, "rate"), args.markdown)
        results.update(tp)

    notes = [c.note for c in pc_cases if c.note]
    if not args.skip_throughput:
        notes += [c.note for c in tp_cases if c.note]
    notes += ["(*) = different op, not compared",
              "add GB/s counts 3 x 4 B x N, sum 4 B x N, matmul 2 n^3 FLOP; "
              "`a + b` at 16M includes faulting in the fresh result buffer "
              "(allocator / transparent-huge-page behaviour matters)"]
    print("Notes:")
    for n in notes:
        print(f"  - {n}")
    if errors:
        print("n/a cells:")
        for e in errors:
            print(f"  - {e}")
    if warnings:
        print("Result check warnings:")
        for w in warnings:
            print(f"  - {w}")
    print()
    misses = check_targets(results, "kael" in libs, args.markdown)
    if args.quick and "kael" in libs:
        print("(--quick: small sizes and few repeats; target results are indicative only)")
    if args.fail_on_miss and misses:
        sys.exit(2)


if __name__ == "__main__":
    main()
