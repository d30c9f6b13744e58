"""Runs well-known kinds of PyTorch training programs on torch and, unchanged but for their import
lines, on kael, from the same initial weights and batches, and tabulates whether each runs on kael,
how far its losses are from torch's, and its median step time against torch's.

The programs are tools/programs/torch/<name>.py. Their kael copies are made here by a mechanical
rename of `torch` to `kael` in import lines only (`import torch` -> `import kael as torch`,
`import torch.nn as nn` -> `import kael.nn as nn`, `from torch.x import y` -> `from kael.x import y`;
`import torch.utils.data` -> `import kael.utils.data`, which loads the submodule that the program
then reaches through the `torch` its `import torch` line bound); `--write-kael DIR` writes them out
and `--diff` shows that only import lines differ.

Each program takes --steps, --seed, --threads, --log (one JSON line per step: loss and seconds, and
lines for evaluation losses), --save-init / --init (the initial state_dict as .npz: the torch run
writes it, the kael run starts from it) and knobs that make runs comparable: --dropout 0, and
--fixed-noise for the VAE and the DCGAN (their noise from a seeded NumPy generator), since torch's
and kael's random generators differ (mt19937 and Philox) and dropout masks or noise drawn from them
cannot agree. Data and batch order come from seeded NumPy generators in both. The kael runs cannot
import torch (a `torch` package that refuses to load is first on their path). Each program also
runs once more on kael with its own defaults (dropout and random noise on) for a few steps, to show
that those paths run.

    python tools/programs/run.py [--steps 20] [--only gpt,mnist] [--threads 1] [--markdown]
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_DIR = os.path.join(HERE, "torch")
REPO = os.path.dirname(os.path.dirname(HERE))

# (name shown, program file, arguments of this variant, arguments that make torch and kael agree)
PROGRAMS = [
    ("gpt", "gpt", [], ["--dropout", "0"]),
    ("makemore-bigram", "makemore", ["--type", "bigram"], []),
    ("makemore-mlp", "makemore", ["--type", "mlp"], []),
    ("makemore-rnn", "makemore", ["--type", "rnn"], []),
    ("makemore-gru", "makemore", ["--type", "gru"], []),
    ("makemore-transformer", "makemore", ["--type", "transformer"], []),
    ("mnist", "mnist", [], ["--dropout1", "0", "--dropout2", "0"]),
    ("word-lm-lstm", "word_language_model", ["--model", "LSTM"], ["--dropout", "0"]),
    ("word-lm-transformer", "word_language_model", ["--model", "Transformer", "--lr", "2"], ["--dropout", "0"]),
    ("vae", "vae", [], ["--fixed-noise"]),
    ("time-sequence", "time_sequence_prediction", [], []),
    ("tagger", "tagger", [], ["--dropout", "0"]),
    ("resnet", "resnet", [], []),
    ("autocast", "autocast_mlp", [], []),
    ("seq2seq-transformer", "seq2seq_transformer", [], ["--dropout", "0"]),
    ("dcgan", "dcgan", [], ["--fixed-noise"]),
    ("unet", "unet", [], []),
    ("legacy-regression", "legacy_regression", [], []),
]
# Programs whose --steps counts something larger than a step: time_sequence_prediction's counts
# LBFGS steps, each of up to --max-iter (10) closure evaluations, which are what it logs.
STEPS_PER_STEP = {"time_sequence_prediction": 10}
# Programs whose float32 runs may part at a ReLU kink: a pre-activation within rounding of zero
# takes opposite signs in the two libraries, one element's gradient differs outright, and the
# trajectories part by far more than rounding (docs/compat.md). They are also compared in float64,
# where rounding is 1e-16 and no kink is crossed.
EARLY_STEPS = 5  # the float32 difference of the first steps, before a kink crossing has had time to grow
FLOAT64_CHECK = {"mnist": ["--dtype", "float64"], "resnet": ["--dtype", "float64"], "unet": ["--dtype", "float64"]}

_IMPORT_TORCH = re.compile(r"^(\s*)import torch(\s+as\s+(\w+))?\s*(#.*)?$")
_IMPORT_TORCH_SUB = re.compile(r"^(\s*)import torch\.([\w.]+)(\s+as\s+\w+)?\s*(#.*)?$")
_FROM_TORCH = re.compile(r"^(\s*)from torch(\.[\w.]+)?(\s+import\s.*)$")


def to_kael(source: str) -> str:
    """The kael copy of a torch program: `torch` becomes `kael` in import lines, nothing else."""
    out = []
    for line in source.splitlines(keepends=True):
        body, nl = (line[:-1], "\n") if line.endswith("\n") else (line, "")
        m = _IMPORT_TORCH.match(body)
        if m:
            alias = m.group(3) or "torch"
            body = f"{m.group(1)}import kael as {alias}" + (f"  {m.group(4)}" if m.group(4) else "")
        elif _IMPORT_TORCH_SUB.match(body):
            body = body.replace("import torch.", "import kael.", 1)
        elif _FROM_TORCH.match(body):
            body = body.replace("from torch", "from kael", 1)
        elif re.match(r"^\s*(import|from)\s+torch\b", body):
            raise ValueError(f"an import of torch the rename does not handle: {body.strip()!r}")
        out.append(body + nl)
    return "".join(out)


def import_only_diff(torch_src: str, kael_src: str) -> list[str]:
    """The changed lines of the kael copy that are not import lines (empty when all are)."""
    bad = []
    for line in difflib.unified_diff(torch_src.splitlines(), kael_src.splitlines(), lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        if not re.match(r"^[+-]\s*(import|from)\s+(torch|kael)\b", line):
            bad.append(line)
    return bad


def _first_error(stderr: str, program_path: str) -> str:
    """The program's last line in the traceback (file:line: code) and the exception line."""
    lines = stderr.strip().splitlines()
    if not lines:
        return "no error output"
    exc = lines[-1].strip()
    where = ""
    base = os.path.basename(program_path)
    for i, line in enumerate(lines):
        m = re.match(r'\s*File "([^"]+)", line (\d+)', line)
        if m and os.path.basename(m.group(1)) == base:
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            where = f"{base}:{m.group(2)}: {code}"
    return f"{where} -> {exc}" if where else exc


def _no_torch_dir(path):
    """A folder holding a `torch` package whose import fails, put first on the kael runs' path: a
    kael copy that reaches torch (a missed import, a library that imports it) fails instead of
    quietly running torch's code."""
    folder = os.path.join(os.path.dirname(path), "_no_torch")
    if not os.path.exists(os.path.join(folder, "torch", "__init__.py")):
        os.makedirs(os.path.join(folder, "torch"), exist_ok=True)
        with open(os.path.join(folder, "torch", "__init__.py"), "w") as f:
            f.write('raise ImportError("the kael copy of a program imported torch")\n')
    return folder


def _run(python, path, args, threads, timeout, block_torch=False):
    env = dict(os.environ)
    if block_torch:
        env["PYTHONPATH"] = os.pathsep.join([_no_torch_dir(path)] + [p for p in [env.get("PYTHONPATH")] if p])
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(threads)
    env.setdefault("PYTHONHASHSEED", "0")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([python, path] + args, capture_output=True, text=True, env=env, timeout=timeout,
                              cwd=REPO)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s", time.perf_counter() - t0
    if proc.returncode != 0:
        return None, _first_error(proc.stderr, path), time.perf_counter() - t0
    return proc.stdout, None, time.perf_counter() - t0


def _read_log(path):
    losses, times = [], []
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            losses.append((rec.get("step", rec.get("eval")), rec["loss"]))
            if "time" in rec:
                times.append(rec["time"])
    return losses, times


def _perturbed(init, out, seed=0):
    """A copy of the initial weights with each float multiplied by 1 + u * N(0, 1), u the unit
    roundoff of its dtype: a change of the size of one rounding, to measure how far torch's own runs
    part from such a change."""
    import numpy as np
    rng = np.random.default_rng(seed)
    w = dict(np.load(init))
    for k, v in w.items():
        if v.dtype.kind == "f":
            w[k] = (v * (1 + np.finfo(v.dtype).eps / 2 * rng.standard_normal(v.shape))).astype(v.dtype)
    np.savez(out, **w)


def run_program(name, prog, variant, compare, steps, threads, workdir, python=sys.executable, timeout=600,
                smoke_steps=3, kael_extra=(), spread=False):
    """One row of the table: runs torch, then kael from torch's initial weights, then kael with the
    program's defaults for a few steps. kael_extra: arguments given to the kael run only (to check
    that the comparison notices a change)."""
    torch_path = os.path.join(TORCH_DIR, prog + ".py")
    kael_path = os.path.join(workdir, "kael", prog + ".py")
    os.makedirs(os.path.dirname(kael_path), exist_ok=True)
    if not os.path.exists(kael_path):
        with open(torch_path) as f:
            src = f.read()
        with open(kael_path, "w") as f:
            f.write(to_kael(src))
    init = os.path.join(workdir, name + ".init.npz")
    tlog, klog = os.path.join(workdir, name + ".torch.jsonl"), os.path.join(workdir, name + ".kael.jsonl")
    prog_steps = max(1, -(-steps // STEPS_PER_STEP.get(prog, 1)))
    common = variant + compare + ["--steps", str(prog_steps), "--threads", str(threads)]
    row = {"program": name, "runs": False, "error": None, "steps": 0, "max_rel_diff": None, "max_rel_diff64": None,
           "ratio": None, "torch_ms": None, "kael_ms": None, "default_run": None}
    err, diff = _compare(python, torch_path, kael_path, common, init, tlog, klog, threads, timeout, kael_extra)
    if err or isinstance(diff, str):
        row["error"] = err or diff
        return row
    row["runs"] = True
    row["max_rel_diff"], row["worst_at"], t_times, k_times, row["early_rel_diff"] = diff
    row["steps"] = len(t_times)
    row["torch_ms"] = statistics.median(t_times) * 1e3
    row["kael_ms"] = statistics.median(k_times) * 1e3
    row["ratio"] = row["kael_ms"] / row["torch_ms"]
    if name in FLOAT64_CHECK:
        err, diff = _compare(python, torch_path, kael_path, common + FLOAT64_CHECK[name], init, tlog, klog, threads,
                             timeout, kael_extra)
        if err or isinstance(diff, str):
            row["error"] = "float64: " + (err or diff)
            return row
        row["max_rel_diff64"], row["worst_at64"] = diff[0], diff[1]
    if spread:
        pinit, plog = os.path.join(workdir, name + ".perturbed.npz"), os.path.join(workdir, name + ".spread.jsonl")
        _perturbed(init, pinit)
        _, err, _ = _run(python, torch_path, common + ["--init", pinit, "--log", plog], threads, timeout)
        if not err:
            t_losses, _ = _read_log(tlog)
            p_losses, _ = _read_log(plog)
            row["torch_spread"] = max(abs(b - a) / max(abs(a), 1e-30) for (_, a), (_, b) in zip(t_losses, p_losses))
    if smoke_steps:
        _, err, _ = _run(python, kael_path, variant + ["--steps", str(smoke_steps), "--threads", str(threads)],
                         threads, timeout, block_torch=True)
        row["default_run"] = err or "ok"
    return row


def _compare(python, torch_path, kael_path, args, init, tlog, klog, threads, timeout, kael_extra=()):
    """(error, None) if a run fails; else (None, (largest relative loss difference, where, torch's
    step times, kael's)), or (None, message) when the two logged different steps."""
    _, err, _ = _run(python, torch_path, args + ["--save-init", init, "--log", tlog], threads, timeout)
    if err:
        return "torch: " + err, None
    _, err, _ = _run(python, kael_path, args + ["--init", init, "--log", klog] + list(kael_extra), threads, timeout,
                     block_torch=True)
    if err:
        return err, None
    t_losses, t_times = _read_log(tlog)
    k_losses, k_times = _read_log(klog)
    if [s for s, _ in t_losses] != [s for s, _ in k_losses]:
        return None, f"logged different steps: torch {len(t_losses)} records, kael {len(k_losses)}"
    worst, worst_at, early = 0.0, None, 0.0
    for (step, lt), (_, lk) in zip(t_losses, k_losses):
        rel = abs(lk - lt) / max(abs(lt), 1e-30)
        if not rel <= worst:  # NaN counts as the worst
            worst, worst_at = rel, step
        if isinstance(step, int) and step < EARLY_STEPS and not rel <= early:
            early = rel
    return None, (worst, worst_at, t_times, k_times, early)


def format_table(rows, markdown=False):
    spread = any(r.get("torch_spread") is not None for r in rows)
    head = ["program", "runs on kael", "steps", "max rel. loss diff", "first 5 steps"] + (
        ["torch spread"] if spread else []) + [
        "float64 diff", "kael/torch step time", "torch ms", "kael ms", "with dropout/noise"]
    body = []
    for r in rows:
        runs = "yes" if r["runs"] else f"no: {r['error']}"
        if r["runs"] and r["error"]:
            runs = f"yes, but {r['error']}"
        body.append([r["program"], runs, str(r["steps"]),
                     "" if r["max_rel_diff"] is None else f"{r['max_rel_diff']:.1e}",
                     "" if r.get("early_rel_diff") is None else f"{r['early_rel_diff']:.1e}"] + (
                     [f"{r['torch_spread']:.1e}" if r.get("torch_spread") is not None else ""] if spread else []) + [
                     f"{r['max_rel_diff64']:.1e}" if r.get("max_rel_diff64") is not None else "",
                     "" if r["ratio"] is None else f"{r['ratio']:.2f}",
                     "" if r["torch_ms"] is None else f"{r['torch_ms']:.2f}",
                     "" if r["kael_ms"] is None else f"{r['kael_ms']:.2f}",
                     r["default_run"] or ""])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
        return "\n".join(lines)
    widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h) for i, h in enumerate(head)]
    fmt = "  ".join("{:<%d}" % w for w in widths)
    return "\n".join([fmt.format(*head)] + [fmt.format(*row) for row in body])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20, help="training steps of each run")
    p.add_argument("--only", default="", help="comma-separated program names (or program files) to run")
    p.add_argument("--threads", type=int, default=1, help="threads of both libraries")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument("--json", default="", help="also write the rows to this JSON file")
    p.add_argument("--smoke-steps", type=int, default=3, help="steps of the kael run with the program's defaults "
                   "(dropout on); 0 skips it")
    p.add_argument("--timeout", type=int, default=600, help="seconds each run may take")
    p.add_argument("--spread", action="store_true", help="also run torch from its initial weights changed by one "
                   "rounding (relative noise of the unit roundoff) and show how far torch's own losses part "
                   "(the 'torch spread')")
    p.add_argument("--write-kael", default="", help="write the kael copies into this folder and stop")
    p.add_argument("--diff", action="store_true", help="print the diff of each kael copy against its torch program")
    args = p.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    selected = [p_ for p_ in PROGRAMS if not only or p_[0] in only or p_[1] in only]
    progs = sorted({prog for _, prog, _, _ in selected})
    if args.write_kael or args.diff:
        for prog in progs:
            with open(os.path.join(TORCH_DIR, prog + ".py")) as f:
                src = f.read()
            ksrc = to_kael(src)
            if args.write_kael:
                os.makedirs(args.write_kael, exist_ok=True)
                with open(os.path.join(args.write_kael, prog + ".py"), "w") as f:
                    f.write(ksrc)
            if args.diff:
                sys.stdout.writelines(difflib.unified_diff(src.splitlines(True), ksrc.splitlines(True),
                                                           f"torch/{prog}.py", f"kael/{prog}.py", n=0))
        return 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="kael_programs_") as workdir:
        for name, prog, variant, compare in selected:
            row = run_program(name, prog, variant, compare, args.steps, args.threads, workdir,
                              timeout=args.timeout, smoke_steps=args.smoke_steps, spread=args.spread)
            rows.append(row)
            print(f"{name}: {'runs' if row['runs'] else 'fails'}", file=sys.stderr, flush=True)
    print(format_table(rows, args.markdown))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
