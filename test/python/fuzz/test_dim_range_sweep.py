"""Dims out of range through every op of native_functions.yaml, against torch.

Every public registry entry with a dim-like parameter (an int or int list naming a dimension:
dim, dims, dim0/dim1/dim2, start_dim/end_dim, source/destination, dimension) is called through
each variant with that parameter out of range on 0-d, 1-d and 2-d inputs (the other arguments
as test_zero_size_sweep.py makes them, with no empty dim). Where torch raises IndexError, kael
must raise IndexError (no result, no other exception, no read past the shape: this sweep runs
under the sanitizers with the suite); anywhere else both must agree as test_fuzz.run_both
asserts. A composite that wraps a dim by hand (`dim < 0 ? dim + nd : dim`) without checking it
fails here. A new registry entry is swept without a line here.
"""
from __future__ import annotations

import pytest

from test_fuzz import run_both
from test_fuzz_ops import ALLOWED, RANDOM, UNINITIALISED, make_call
from test_zero_size_sweep import OPS, _arguments, _variants

DIM_NAMES = {"dim", "dims", "dim0", "dim1", "dim2", "start_dim", "end_dim", "source", "destination", "dimension"}
# tile's `dims` are repetition counts, not dimensions
NOT_DIMS = {("tile", "dims")}


def _dim_params(f):
    return [p for p in f.schema.params
            if p.name in DIM_NAMES and p.type.base in ("int", "int[]") and (f.name, p.name) not in NOT_DIMS]


SWEPT = [(f, p) for f in OPS for p in _dim_params(f)]


def _bad_dims(nd):
    n = max(nd, 1)  # a 0-d tensor takes -1 and 0, as torch's
    return [n, -n - 1, n + 5, -n - 9, 2 ** 62, -2 ** 63]


def _dim_list(f, p, nd, value):
    """An int[] of dims with `value` last: after the in-range dims the op needs (rot90 takes two,
    permute one per dim)."""
    if f.name == "permute":
        return list(range(max(nd, 1) - 1)) + [value]
    if f.name == "rot90":
        return [0, value]
    return [value]


def _arguments_for(f, shape):
    """test_zero_size_sweep's arguments on full tensors of `shape`, with the values that make
    the call valid but for its dim: scatter's reduce is add or multiply; tensor_split's tensor
    of indices is a 1-d int64 tensor. None where a sample cannot be made for the shape (the
    split sizes of a 0-d tensor)."""
    try:
        names, recipe = _arguments(f, [shape] * 3, "float32")
    except IndexError:
        return None
    for i, n in enumerate(names):
        if n == "reduce" and f.name in ("scatter", "scatter_"):
            recipe[i] = ("lit", "add")
        if n == "tensor_indices_or_sections":
            recipe[i] = ("t", "int64", (1,), "contig", (2,), None)
    return names, recipe


def _cases(f, p):
    for shape in [(3, 3), (3,), ()]:
        for value in _bad_dims(len(shape)):
            made = _arguments_for(f, shape)
            if made is None:
                continue
            names, recipe = made
            arg = ("lit", value if p.type.base == "int" else _dim_list(f, p, len(shape), value))
            if p.name in names:
                recipe[names.index(p.name)] = arg
                by_keyword = []
            else:
                by_keyword = [p.name]  # a parameter with a default: given by keyword
            for variant in _variants(f):
                yield variant, names, recipe, by_keyword, arg, f"{variant}-{len(shape)}d-{value}"


OUTCOMES = {"index errors": 0, "other": 0}


@pytest.mark.parametrize("f,p", SWEPT, ids=[f"{f.schema.full_name}-{p.name}" for f, p in SWEPT])
def test_dim_out_of_range(f, p):
    failures, index_errors = [], 0
    for variant, names, recipe, by_keyword, arg, what in _cases(f, p):
        params = {q.name: q for q in f.schema.params}
        positional = [n for n in names if not params[n].kwonly]
        if variant != "function":
            positional = positional or names[:1]
        keywords = [n for n in names if n not in positional] + by_keyword
        values = [r for n, r in zip(names, recipe) if n in positional] + \
                 [r for n, r in zip(names, recipe) if n not in positional] + ([arg] if by_keyword else [])
        if variant == "out":
            keywords.append("out")
            values.append(("t", "float32", (0,), "contig", (2,), None))
        call = make_call(f, variant, positional, keywords, False)
        try:
            kres, tres = run_both(call, tuple(values), uninitialised=f.name in UNINITIALISED | RANDOM,
                                  compare_inputs=not (f.name in RANDOM and f.name.endswith("_")),
                                  allowed=ALLOWED(f, None, False))
        except AssertionError as e:
            failures.append(f"{what}: {str(e).splitlines()[0][:300]}")
            continue
        if isinstance(tres, IndexError):
            index_errors += 1
            if not isinstance(kres, IndexError):
                failures.append(f"{what}: torch raised IndexError ({tres}), kael {kres!r:.200}")
    OUTCOMES["index errors"] += index_errors
    assert not failures, f"{len(failures)} cases differ from torch:\n" + "\n".join(failures[:12])
    # the sample call is good enough for torch to reach its dim check
    assert index_errors > 0 or (f.name, p.name) in NO_INDEX_ERROR, \
        f"torch raised no IndexError for {f.schema.full_name}'s {p.name}: the sweep's sample call misses the check"


# Entries where torch reports a dim out of range otherwise than by IndexError (each checked
# above to raise in both libraries)
NO_INDEX_ERROR: set[tuple[str, str]] = set()


def test_sweep_size():
    assert len(SWEPT) > 90
    print(f"dim range sweep: {len(SWEPT)} (entry, parameter) pairs, "
          f"{sum(len(list(_cases(f, p))) for f, p in SWEPT)} cases")
