"""Fuzzing the entry points of the Python Tensor object (see test_fuzz.py for how the suite
runs): random and hostile Python objects thrown at advanced indexing (compared with torch where
both compute), at kael.Size, kael.device, Tensor.to/type/new_*, as_tensor/asarray,
from_numpy/from_dlpack and the factories. Only ordinary Python exceptions may come out."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import kael
from test_fuzz import (BIG_INTS, PYTHON_ERRORS, SMALL_INTS, SPECIAL_FLOATS, build, fuzz, hostile_objects, record_case,
                       run_both, tensor_recipes)
from test_fuzz_ops import junk, t0

# The normal run keeps the whole fuzz suite under its CPU budget (test_fuzz.py): a few examples
# per property here; the long run (kael-long) takes its own count.
CI = os.environ.get("KAEL_FUZZ_PROFILE", "kael-ci") == "kael-ci"
few = settings(max_examples=6) if CI else (lambda test: test)

# Objects of every kind: numbers at the limits, hostile objects, junk, 0-d tensors, nested lists,
# NumPy arrays and tensors of index dtypes.
leaf = st.one_of(
    st.sampled_from(SMALL_INTS + BIG_INTS).map(lambda v: ("lit", v)),
    st.sampled_from(SPECIAL_FLOATS).map(lambda v: ("lit", v)),
    hostile_objects(), junk, t0,
)
anything = st.recursive(leaf, lambda inner: st.lists(inner, max_size=3).map(lambda xs: ("list", tuple(xs))),
                        max_leaves=6)


def materialise(recipe, lib):
    if isinstance(recipe, tuple) and recipe and recipe[0] == "list":
        return [materialise(r, lib) for r in recipe[1]]
    return build(recipe, lib)


def only_python_errors(call):
    try:
        call()
    except PYTHON_ERRORS:
        pass
    except SystemError as e:  # a C-API misuse: never acceptable
        pytest.fail(f"SystemError: {e}")


# ---------------------------------------------------------------- advanced indexing vs torch

index_values = st.sampled_from([0, 1, -1, 2, -3, 3, 5, -6])
int_index = st.one_of(
    st.lists(index_values, max_size=4).map(lambda v: ("ilist", tuple(v))),
    st.lists(index_values, min_size=1, max_size=4).map(lambda v: ("itensor", tuple(v))),
    st.lists(st.lists(index_values, min_size=2, max_size=2), min_size=1, max_size=2).map(
        lambda v: ("itensor2", tuple(map(tuple, v)))),
    st.lists(st.booleans(), min_size=1, max_size=4).map(lambda v: ("btensor", tuple(v))),
)
basic_item = st.sampled_from([("lit", None), ("lit", Ellipsis), ("lit", 0), ("lit", -1), ("slice", (None, None, None)),
                              ("slice", (1, None, None)), ("slice", (None, None, 2)), ("lit", True)])
adv_keys = st.lists(st.one_of(int_index, basic_item), min_size=1, max_size=4).map(lambda xs: ("tuple", tuple(xs)))


def build_adv(recipe, lib):
    kind = recipe[0]
    if kind == "tuple":
        return tuple(build_adv(r, lib) for r in recipe[1])
    if kind == "ilist":
        return list(recipe[1])
    if kind in ("itensor", "itensor2"):
        return lib.tensor(recipe[1], dtype=lib.int64)
    if kind == "btensor":
        return lib.tensor(recipe[1])
    if kind == "slice":
        return slice(*recipe[1])
    return recipe[1]


@fuzz
@few
@given(x=tensor_recipes(), key=adv_keys)
def test_advanced_getitem(x, key):
    record_case("advanced_getitem", (x, key))

    def call(lib, t):
        return t[build_adv(key, lib)]
    run_both(call, (x,))


@fuzz
@few
@given(x=tensor_recipes(), key=adv_keys, value=st.sampled_from([0, 1, -2, 2.5, True]))
def test_advanced_setitem(x, key, value):
    record_case("advanced_setitem", (x, key, value))

    def call(lib, t):
        t[build_adv(key, lib)] = value
        return t
    run_both(call, (x,))


# ---------------------------------------------------------------- hostile objects


@fuzz
@few
@given(x=tensor_recipes(), key=anything, value=anything)
def test_indexing_with_anything(x, key, value):
    record_case("indexing_anything", (x, key, value))
    t = build(x, kael)
    only_python_errors(lambda: t[materialise(key, kael)])
    only_python_errors(lambda: t.__setitem__(materialise(key, kael), materialise(value, kael)))


FACTORIES = [
    lambda a, b: kael.Size(a),
    lambda a, b: kael.device(a),
    lambda a, b: kael.device(a, b),
    lambda a, b: kael.ones(2).to(a),
    lambda a, b: kael.ones(2).to(a, b),
    lambda a, b: kael.ones(2).to(device=a, dtype=b),
    lambda a, b: kael.ones(2).type(a),
    lambda a, b: kael.ones(2).new_zeros(a),
    lambda a, b: kael.ones(2).new_full(a, b),
    lambda a, b: kael.ones(2).new_tensor(a),
    lambda a, b: kael.ones(2).new_ones(a, dtype=b),
    lambda a, b: kael.as_tensor(a, dtype=b),
    lambda a, b: kael.asarray(a, copy=b),
    lambda a, b: kael.from_numpy(a),
    lambda a, b: kael.from_dlpack(a),
    lambda a, b: kael.zeros(a),
    lambda a, b: kael.full(a, b),
    lambda a, b: kael.tensor(a, dtype=b),
    lambda a, b: kael.ones(2).as_subclass(a),
    lambda a, b: np.asarray(kael.ones(2), dtype=a),
]


@fuzz
@few
@given(which=st.integers(0, len(FACTORIES) - 1), a=anything, b=anything)
def test_factories_with_anything(which, a, b):
    record_case("factories_anything", (which, a, b))
    only_python_errors(lambda: FACTORIES[which](materialise(a, kael), materialise(b, kael)))


def test_property_files_are_collected_by_the_fuzz_suite():
    from test_fuzz import FUZZ_FILES
    assert any(f.endswith("test_fuzz_pyobject.py") for f in FUZZ_FILES)
    assert torch is not None
