"""Bool tensors over bytes other than 0 and 1, through every op of native_functions.yaml, against torch.

Memory kael did not write may hold any byte where a bool is read: NumPy's uint8 viewed as bool,
DLPack and frombuffer buffers, `Tensor.view(kael.bool)`. A byte that is not 0 is true (torch's
loads read a bool so, c10::load); C++ reading such a byte as bool is undefined, and took the byte
as the value (a sum of bools counted 255 for one element, `x == True` was false, logical_not of 2
was true). Note [Bool bytes] in kael/core/convert.h says how kael reads them.

Every public registry entry is called through each of its variants with every bool tensor
argument over the bytes 2, 0, 255, 1, 128, 3 and 64 (repeated), contiguous and strided, on a row
longer than a vector and on a 2-d shape: all tensor arguments bool, and bool masks and conditions
beside float32 tensors. Where torch computes, kael must give the same result and leave the same
values in its inputs; where torch raises, kael must raise. Bool indexing, setitem, the conversions
to Python and NumPy, and the functions outside the registry that take a mask follow by hand. A new
registry entry is swept without a line here.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import kael
from test_fuzz import run_both
from test_zero_size_sweep import OPS, _arguments, _n_tensors, _variants, sweep

BYTES = (2, 0, 255, 1, 128, 3, 64)
SHAPES = [(37,), (3, 5)]
LAYOUTS = ["contig", "step"]


def _foreign(recipe, layout):
    """The recipe with each bool tensor made over BYTES in `layout`."""
    if isinstance(recipe, tuple) and recipe and recipe[0] == "t" and recipe[1] == "bool":
        return ("bytes", recipe[2], layout, BYTES)
    if isinstance(recipe, tuple) and recipe and recipe[0] == "list":
        return ("list", [_foreign(r, layout) for r in recipe[1]])
    return recipe


def _has_bool(recipe):
    return any(isinstance(r, tuple) and r and (r[0] == "bytes" or r[0] == "list" and _has_bool(r[1]))
               for r in recipe)


def _cases(f):
    cases = []
    for main in ("bool", "float32"):
        for shape in SHAPES:
            names, recipe = _arguments(f, [shape] * max(_n_tensors(f), 1), main)
            if any(p.name == "stable" for p in f.schema.params):
                # torch's order of equal keys is its kernel's own unless stable (Note [Sort order of ties])
                names, recipe = names + ["stable"], recipe + [("lit", True)]
            for layout in LAYOUTS:
                foreign = [_foreign(r, layout) for r in recipe]
                if not _has_bool(foreign):
                    continue
                for variant in _variants(f):
                    case_names, case_recipe = list(names), list(foreign)
                    if variant == "out":
                        case_names.append("out")
                        case_recipe.append(("t", main, (0,), "contig", (0,), None))
                    cases.append((variant, case_names, case_recipe, f"{variant}-{main}-{shape}-{layout}"))
    return cases


SWEPT = [f for f in OPS if _cases(f)]
OUTCOMES = {"computed": 0, "both raised": 0}


@pytest.mark.parametrize("f", SWEPT, ids=[f.schema.full_name for f in SWEPT])
def test_bool_bytes(f):
    sweep(f, _cases(f), OUTCOMES, keyword_only=("out", "stable"))


def _mask(layout="contig", shape=(37,)):
    return ("bytes", shape, layout, BYTES)


def _floats(shape=(37,)):
    return ("t", "float32", shape, "contig", (2, 4, 6, 3), None)


def _setitem(lib, x, m):
    x[m] = -1.0
    return x


# Paths outside the registry's sweep that read a bool tensor, by hand
BY_HAND = {
    "getitem": (lambda lib, x, m: x[m], (_floats(), _mask())),
    "getitem-strided": (lambda lib, x, m: x[m], (_floats(), _mask("step"))),
    "getitem-2d": (lambda lib, x, m: x[m], (_floats((3, 5)), _mask("contig", (3, 5)))),
    "setitem": (_setitem, (_floats(), _mask())),
    "setitem-strided": (_setitem, (_floats(), _mask("step"))),
    "nonzero-as-tuple": (lambda lib, m: lib.nonzero(m, as_tuple=True), (_mask("step", (3, 5)),)),
    "where-one-argument": (lambda lib, m: lib.where(m), (_mask("contig", (3, 5)),)),
    "unique": (lambda lib, m: lib.unique(m, return_inverse=True, return_counts=True), (_mask(),)),
    "unique-consecutive": (lambda lib, m: lib.unique_consecutive(m, return_counts=True), (_mask(),)),
    "tolist": (lambda lib, m: m.tolist(), (_mask("step"),)),
    "item": (lambda lib, m: [m[i].item() for i in range(len(m))], (_mask(),)),
    "bool": (lambda lib, m: [bool(m[i]) for i in range(len(m))], (_mask(),)),
    "int": (lambda lib, m: [int(m[i]) for i in range(len(m))], (_mask(),)),
    "float": (lambda lib, m: [float(m[i]) for i in range(len(m))], (_mask(),)),
    "to-float": (lambda lib, m: m.float(), (_mask("step"),)),
    "to-long": (lambda lib, m: m.long(), (_mask(),)),
    "clone-then-sum": (lambda lib, m: m.clone().sum(), (_mask("step"),)),
    "contiguous-then-eq": (lambda lib, m: m.contiguous() == True, (_mask("step"),)),  # noqa: E712
    "attention-mask": (lambda lib, q, m: lib.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=m),
                       (("t", "float32", (1, 3, 4), "contig", (2, 4, 6, 3), None), _mask("contig", (3, 3)))),
    "masked-fill-functional": (lambda lib, x, m: x.masked_fill(m, 0.5), (_floats((3, 5)), _mask("step", (3, 5)))),
    "cross-entropy-of-mask": (lambda lib, x, m: lib.nn.functional.binary_cross_entropy(x.sigmoid(), m.float()),
                              (_floats(), _mask())),
    # the bytes a copy of such a bool holds: 0 or 1, as torch's (read back through a uint8 view)
    "clone-bytes": (lambda lib, m: m.clone().view(lib.uint8), (_mask(),)),
    "clone-strided-bytes": (lambda lib, m: m.clone().view(lib.uint8), (_mask("step"),)),
    "contiguous-bytes": (lambda lib, m: m.contiguous().view(lib.uint8), (_mask("step"),)),
    "copy-bytes": (lambda lib, m: lib.zeros(37, dtype=lib.bool).copy_(m).view(lib.uint8), (_mask(),)),
    "copy-strided-bytes": (lambda lib, m: lib.zeros(37, dtype=lib.bool).copy_(m).view(lib.uint8), (_mask("step"),)),
    "copy-2d-bytes": (lambda lib, m: lib.zeros(3, 5, dtype=lib.bool).copy_(m).view(lib.uint8),
                      (_mask("step", (3, 5)),)),
}


@pytest.mark.parametrize("name", list(BY_HAND))
def test_bool_bytes_by_hand(name):
    call, recipe = BY_HAND[name]
    run_both(call, recipe)


def test_numpy_keeps_the_bytes():
    """Tensor.numpy() shares the memory, as torch's: the bytes come back as they went in."""
    raw = np.array(BYTES * 3, dtype=np.uint8)
    k = kael.from_numpy(raw.view(np.bool_))
    t = torch.from_numpy(raw.copy().view(np.bool_))
    assert k.numpy().view(np.uint8).tolist() == t.numpy().view(np.uint8).tolist() == list(BYTES * 3)
    assert k.sum().item() == t.sum().item() == 18


def test_sweep_size():
    cases = sum(len(_cases(f)) for f in SWEPT) + len(BY_HAND)
    print(f"bool bytes sweep: {len(SWEPT)} registry entries, {cases} cases"
          + (f"; so far {OUTCOMES['computed']} computed by both, {OUTCOMES['both raised']} raised by both"
             if sum(OUTCOMES.values()) else ""))
    assert len(SWEPT) > 150
