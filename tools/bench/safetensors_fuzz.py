"""Long fuzz run of kael's safetensors reader (at least 20,000 cases by default).

    .venv/bin/python tools/bench/safetensors_fuzz.py [--cases N] [--start S]

The cases are those of test/python/interop/test_safetensors_fuzz.py (test/python/safetensors_fuzzing.py):
valid files of the reference writer mutated by bit flips, truncation, JSON-aware header edits, raw
splices, length-field edits and random headers, each read with read_safetensors_metadata and
load_safetensors (read or mmap). Prints the outcomes per mutation; exits 1 if anything but
ValueError/OSError came out or a loaded file disagreed with the reference.
Under ASan: bash tools/run_sanitizers.sh builds build/asan; run this script with that build's
kael on the path (see docs/hardening.md).
"""
import argparse
import collections
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "test" / "python"))

from safetensors_fuzzing import MUTATIONS, make_case, run_case  # noqa: E402

import kael  # noqa: E402


def reason(path, mmap):
    """kael's reason for refusing the file at `path`, names and numbers blurred."""
    try:
        kael.read_safetensors_metadata(path)
        kael.load_safetensors(path, mmap=mmap)
    except ValueError as e:
        text = str(e).split(f"{path.name}': ", 1)[-1]
        text = re.sub(r"tensor '(?:[^'\\]|\\.)*'", "tensor T", text)
        text = re.sub(r"name '(?:[^'\\]|\\.)*'", "name N", text)
        return re.sub(r"\d+", "#", text)
    return "(no error the second time)"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--start", type=int, default=10_000, help="first seed (the test suite uses 0..2999)")
    args = parser.parse_args()
    outcomes = collections.Counter()
    stricter = collections.Counter()  # why kael refuses files the reference reads
    failures = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.safetensors"
        for seed in range(args.start, args.start + args.cases):
            kind, data, mmap = make_case(seed)
            try:
                outcome = run_case(path, data, mmap, split_refusals=True)
            except AssertionError as e:
                failures.append((seed, kind, mmap, str(e)))
                outcome = "FAILED"
            outcomes[kind, outcome] += 1
            if outcome == "ValueError (the reference loads it)":
                stricter[reason(path, mmap)] += 1
    elapsed = time.perf_counter() - start
    kinds = sorted({o for _, o in outcomes})
    print(f"{args.cases} cases (seeds {args.start}..{args.start + args.cases - 1}) in {elapsed:.1f} s")
    print("| mutation | " + " | ".join(kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    for kind in MUTATIONS:
        print(f"| {kind} | " + " | ".join(str(outcomes[kind, o]) for o in kinds) + " |")
    print("| total | " + " | ".join(str(sum(v for (_, o), v in outcomes.items() if o == k)) for k in kinds) + " |")
    if stricter:
        print("\nfiles kael refuses and the reference reads, by kael's reason:")
        for text, n in stricter.most_common():
            print(f"  {n:6d}  {text}")
    for seed, kind, mmap, msg in failures[:20]:
        print(f"FAILED case {seed} ({kind}, mmap={mmap}): {msg}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
