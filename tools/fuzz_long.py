#!/usr/bin/env python3
"""The long fuzz run: the property-based fuzz suite (test/python/fuzz/test_fuzz_*.py) with the
"kael-long" hypothesis profile, enough examples per property for at least --cases cases in
all, and a random seed (printed, so a run can be repeated with --seed).

    .venv/bin/python tools/fuzz_long.py                   # >= 100,000 cases, this checkout's build
    .venv/bin/python tools/fuzz_long.py --cases 20000 --seed 1234
    .venv/bin/python tools/fuzz_long.py --jobs 2          # two child pytests, the properties shared
    bash tools/run_sanitizers.sh --fuzz-long              # the same under ASan + UBSan

It runs the suite in a child pytest (as the normal test run does, test_fuzz.py), so a crash
ends the child, not this script: the script then reports the example that was running
(written before each call) and the end of the child's output. The child's complete output
(every failure's example and traceback) goes to the file --log names (default
fuzz_long-SEED.log in the current directory; fuzz_long-SEED.K.log for the K-th child with
--jobs) as it runs; the script prints its path. Prints the
cases run, each failing property with its first error line, and the wall time, and exits
non-zero if anything failed. --python picks the interpreter (the sanitizer
script passes its environment through: LD_PRELOAD, PYTHONPATH, ASAN_OPTIONS, UBSAN_OPTIONS).
"""
from __future__ import annotations

import argparse
import os
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test" / "python"))
sys.path.insert(0, str(ROOT / "test" / "python" / "fuzz"))


def collect_properties(python):
    """The node ids (absolute paths) of the property tests in the suite, parametrized ones one
    per parameter."""
    import subprocess
    env = dict(os.environ, KAEL_FUZZ_CHILD="1")
    files = sorted(str(p) for p in (ROOT / "test" / "python" / "fuzz").glob("test_fuzz_*.py")
                   if p.name != "test_fuzz_regressions.py")
    out = subprocess.run([python, "-m", "pytest", *files, "--collect-only", "-q", "-p", "no:cacheprovider",
                          "--rootdir", str(ROOT)], capture_output=True, text=True, env=env)
    ids = [line for line in out.stdout.splitlines() if "::" in line]
    if not ids:
        sys.exit(f"could not collect the fuzz suite:\n{out.stdout[-4000:]}{out.stderr[-4000:]}")
    # (relative to --rootdir; the child runs in the current directory, which may be another)
    return [str(ROOT / i.split("::", 1)[0]) + "::" + i.split("::", 1)[1] for i in ids]


def run_shards(test_fuzz, ids, jobs, extra, log_path):
    """Runs the properties in `jobs` child pytests at once, each given every jobs-th id (in
    collection order, so the slow families spread over the children), each with its own log
    (log_path with .K before the suffix). Hypothesis derives every property's examples from
    the seed alone, so a property gets the same cases whatever shard runs it. Returns
    [(returncode, output, stats, trace, log)] per shard."""
    from concurrent.futures import ThreadPoolExecutor
    shards = [ids[k::jobs] for k in range(jobs)]
    logs = [log_path.with_name(f"{log_path.stem}.{k}{log_path.suffix}") for k in range(jobs)]

    def one(k):
        return (*test_fuzz.run_child("kael-long", extra_args=extra, env=dict(os.environ),
                                     log_path=logs[k], tests=shards[k]), logs[k])
    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(one, range(jobs)))


def first_error(out, name):
    """': <the first error line>' of the failure section of the test `name` in pytest's output."""
    test = name.split("::", 1)[-1]
    head = re.search(r"^_{3,} " + re.escape(test) + r" _{3,}$", out, re.M)
    if head is None:
        return ""
    section = out[head.end():]
    nxt = re.search(r"^(_{3,} \S.* _{3,}|=+ .* =+)$", section, re.M)
    section = section[:nxt.start()] if nxt else section
    err = re.search(r"^E +(\S.*)$", section, re.M)
    return f": {err.group(1)[:200]}" if err else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=100_000, help="cases to run in all (default 100,000)")
    ap.add_argument("--seed", type=int, default=None, help="hypothesis seed (default: random, printed)")
    ap.add_argument("--python", default=sys.executable, help="interpreter to run the suite with")
    ap.add_argument("-k", default=None, help="only the properties pytest -k selects")
    ap.add_argument("--jobs", type=int, default=1,
                    help="child pytests to run at once, each a share of the properties (default 1)")
    ap.add_argument("--resume", action="store_true",
                    help="leave out the properties the logs of an earlier run with this seed name as passed or failed "
                         "(a run whose children died: the rest of it)")
    ap.add_argument("--log", default=None,
                    help="file for pytest's complete output (default: fuzz_long-SEED.log in the current directory)")
    args = ap.parse_args()

    seed = args.seed if args.seed is not None else random.randrange(2 ** 32)
    log_path = Path(args.log if args.log is not None else f"fuzz_long-{seed}.log").resolve()
    ids = collect_properties(args.python)
    n_props = len(ids)
    if args.resume:
        done = set()
        for old_log in log_path.parent.glob(f"{log_path.stem}*{log_path.suffix}"):
            done |= {re.sub(r"^.*?(?=test/python/fuzz/)", "", m) for m in
                     re.findall(r"^(\S+::\S+) (?:PASSED|FAILED)\b", old_log.read_text(errors="replace"), re.M)}
        ids = [i for i in ids if re.sub(r"^.*?(?=test/python/fuzz/)", "", i) not in done]
        print(f"fuzz_long: resuming, {n_props - len(ids)} of {n_props} properties done in the logs", flush=True)
        log_path = log_path.with_name(f"{log_path.stem}.resumed{log_path.suffix}")
    # Properties stop early when hypothesis runs out of distinct examples (small search spaces),
    # so each gets a share with a margin; the count below is what actually ran.
    per_property = max(100, -(-args.cases * 5 // 4 // n_props))
    os.environ["KAEL_FUZZ_EXAMPLES"] = str(per_property)
    sys.executable = args.python  # run_child runs the suite with sys.executable
    import test_fuzz  # noqa: E402  (the wrapper's machinery: one way to run the suite)

    # -v -v (over run_child's -q): each property's name and outcome as it ends, so the failures
    # before a crash are named in the log, not only in pytest's summary at the end
    extra = [f"--hypothesis-seed={seed}", "-rf", "-v", "-v"]
    if args.k:
        extra += ["-k", args.k]
    jobs = max(1, min(args.jobs, len(ids)))
    # the children share the machine's memory (each capped: test_fuzz._limit_memory)
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    os.environ["KAEL_FUZZ_CHILD_MEMORY"] = str(min(test_fuzz.CHILD_MEMORY, int(physical * 0.6) // jobs))
    print(f"fuzz_long: {n_props} properties x up to {per_property} examples, seed {seed}, "
          f"{jobs} child process{'es' if jobs > 1 else ''}, python {args.python}", flush=True)
    start = time.monotonic()
    if jobs == 1:
        print(f"fuzz_long: pytest's complete output goes to {log_path}", flush=True)
        results = [(*test_fuzz.run_child("kael-long", extra_args=extra, env=dict(os.environ), log_path=log_path,
                                         tests=ids if args.resume else None), log_path)]
    else:
        print(f"fuzz_long: pytest's complete output goes to {log_path.stem}.K{log_path.suffix}, "
              f"K = 0..{jobs - 1}", flush=True)
        results = run_shards(test_fuzz, ids, jobs, extra, log_path)
    elapsed = time.monotonic() - start
    total, failed, summaries, crashes = 0, [], [], []
    for rc, out, stats, trace, log in results:
        # pytest's last line ("3 failed, 480 passed in 12.0s"; framed by "=" unless -q);
        # exit 5: -k selected none of this child's properties
        summary = [line for line in out.splitlines()
                   if re.match(r"^(=+ )?\d+ (passed|failed|errors?|skipped|deselected)\b.* in [\d.]+s\b.*$", line)]
        if rc not in (0, 1, 5) or (rc != 5 and not summary):
            crashes.append((rc, out, trace, log))
        summaries += summary
        total += stats.get("total", 0)
        # (an absolute node id is shown relative to the current directory: shown from the suite's)
        names = re.findall(r"^FAILED (\S+)", out, re.M)
        if rc not in (0, 1, 5):  # died: the failures before it, from the lines of each property
            names = re.findall(r"^(\S+::\S+) FAILED\b", out, re.M)
        failed += [(re.sub(r"^.*?(?=test/python/fuzz/)", "", name), first_error(out, name), log) for name in names]
    for rc, out, trace, log in crashes:
        print(out[-20000:])
    print("\n".join(summaries))
    died = ", ".join(f"child died (exit {rc})" for rc, *_ in crashes)
    print(f"fuzz_long: cases run {total}, failing properties {len(failed)}"
          f"{', ' + died if died else ''}, {elapsed:.0f} s, seed {seed}")
    for name, error, log in failed:
        print(f"  FAILED {name}{error}" + (f"  ({log.name})" if jobs > 1 else ""))
    for rc, out, trace, log in crashes:
        print(f"  the example running when {log.name}'s child died: {trace}")
    if failed or crashes:
        print(f"fuzz_long: the details are in {log_path if jobs == 1 else log_path.parent}")
    ok = not failed and not crashes
    if ok and total < args.cases and not args.k and not args.resume:  # (-k, --resume: a part of the suite)
        print(f"fuzz_long: only {total} of {args.cases} cases ran")
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
