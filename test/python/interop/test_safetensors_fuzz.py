"""Fuzzing the safetensors reader: 3,000 valid files of the reference writer, mutated (bit flips,
truncation, header edits, raw splices, length-field edits, random headers), fed to
kael.read_safetensors_metadata and kael.load_safetensors (read and mmap). Only ValueError and
OSError may come out, never a crash; a file kael accepts holds the values the reference reads.
(safetensors 0.8.0 itself writes an unreadable header for no tensors with an empty metadata dict,
`{},"__metadata__":{}}`; kael refuses it as the reference's reader does.)
tools/bench/safetensors_fuzz.py runs the same cases by the tens of thousands."""
import collections

import pytest

from safetensors_fuzzing import MUTATIONS, make_case, reference_tensors, run_case

CASES = 3000


def test_mutated_files_raise_only_value_or_os_errors(tmp_path):
    path = tmp_path / "fuzz.safetensors"
    outcomes = collections.Counter()
    for seed in range(CASES):
        kind, data, mmap = make_case(seed)
        try:
            outcome = run_case(path, data, mmap)
        except AssertionError as e:
            pytest.fail(f"case {seed} ({kind}, mmap={mmap}): {e}\nfile: {data[:300]!r}")
        outcomes[kind, outcome] += 1
        if kind == "none":  # an unmutated file loads, unless the reference wrote one it cannot read itself
            assert outcome == "loaded" or reference_tensors(data) is None, (seed, outcome, data[:300])
    # every mutation both breaks files and leaves some loadable (the cases reach deep)
    for kind in MUTATIONS:
        if kind != "none":
            assert outcomes[kind, "ValueError"] > 0, (kind, outcomes)
    assert outcomes["none", "loaded"] > CASES // len(MUTATIONS) * 9 // 10, outcomes
    assert sum(v for (_, o), v in outcomes.items() if o == "loaded") > CASES // 10, outcomes
