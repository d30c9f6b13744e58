"""Zero-size dims through every op of native_functions.yaml, against torch.

Nothing here names an op to call (a few argument values are picked by parameter name): every
public registry entry is called, through each of its variants (function, method, in-place
method, out=), with tensors that have a dim of size 0 in each position (1-d, 2-d and 3-d; all
tensor arguments empty at once, and each one alone beside full ones), as float32 and as int64
inputs, and with each dim named where the op takes one. Where torch computes, kael must give
the same shape, dtype and values (and leave the same values in its inputs); where torch raises,
kael must raise an ordinary exception (test_fuzz.run_both asserts both). A new registry entry
is swept without a line here. The size of the sweep is printed by test_sweep_size for
docs/hardening.md.
"""
from __future__ import annotations

import pytest
import torch

import kael
from helpers import check
from test_fuzz import run_both, value_pool
from test_fuzz_ops import ALLOWED, RANDOM, REGISTRY, UNINITIALISED, make_call

# Entries with no Python spelling of their own: private kernels (reached through the public op
# they serve, which is swept) and the ops torch keeps in torch.nn.functional (swept below by
# hand through kael.nn.functional).
OPS = [f for f in REGISTRY if set(f.variants) & {"function", "method"} and not f.name.startswith("_")
       and f.name not in kael._FUNCTIONAL_ONLY]

LETTERS = "abcdefgh"
FULL = 3  # the size of every dim that is not the empty one


def _values(dtype):
    """Indices into test_fuzz's value pool of small ordinary values (valid as indices too)."""
    pool = value_pool(dtype)
    want = {"float32": [1.0, 0.5, 3.0, -1.0], "int64": [1, 0, 2, 1], "bool": [True, False]}[dtype]
    return tuple(pool.index(v) for v in want)


def _tensor(dtype, shape):
    return ("t", dtype, tuple(shape), "contig", _values(dtype), None)


def _tensor_dtype(param, main):
    if param.name in ("index", "indices", "target", "sorter", "offsets"):
        return "int64"
    if param.name in ("mask", "condition"):
        return "bool"
    return main


def _int_arg(param, shape):
    name = param.name
    if name in ("dim", "dim0", "start_dim", "source"):
        return 0
    if name in ("dim1", "end_dim", "destination"):
        return len(shape) - 1
    if name in ("num_classes", "num_weights"):
        return FULL  # more than the largest index value (2)
    if name in ("chunks", "n", "steps", "num_samples", "minlength", "end", "to", "size", "sections"):
        return 2
    if name in ("diagonal", "offset", "seed", "start", "storage_offset", "k"):
        return 0 if name != "k" else 1
    if name == "padding_idx":
        return -1
    return 1


def _int_list_arg(param, shape):
    name = param.name
    if name in ("size", "shape", "sizes"):
        return list(shape)
    if name == "stride":
        return [int(torch.tensor(shape[i + 1:]).prod()) for i in range(len(shape))]
    if name in ("dim", "dims", "source"):
        return [0]
    if name == "destination":
        return [len(shape) - 1]
    if name == "normalized_shape":
        return [shape[-1]]
    if name == "repeats":
        return [2] * len(shape)
    if name == "shifts":
        return [1]
    if name in ("split_size", "split_sizes"):
        return [shape[0]]
    return [1]


STR_ARGS = {"reduce": "sum", "rounding_mode": "floor", "side": "left", "approximate": "none", "p": "fro"}


def _arguments(f, shapes, main, dim=None):
    """The recipes of f's arguments: each tensor parameter its shape from `shapes` (in order),
    the required other parameters a value that fits them, `dim` where given."""
    tensors = iter(shapes)
    shape = shapes[0]
    names, recipe = [], []
    for p in f.schema.params:
        base = p.type.base
        if p.name == "dim" and dim is not None and base in ("int", "int[]"):
            value = ("lit", dim if base == "int" else [dim])
        elif base == "Tensor" and (not p.type.optional or p.name == "self"):
            value = _tensor(_tensor_dtype(p, main), next(tensors, shape))
        elif base == "Tensor[]":
            dtype = _tensor_dtype(p, main)
            value = ("list", [_tensor(dtype, next(tensors, shape)), _tensor(dtype, next(tensors, shape))][
                :1 if p.name == "indices" else 2])
        elif p.has_default:
            continue  # its default
        elif base == "Tensor":  # an optional tensor without a default (convolution's bias)
            value = ("lit", None)
        elif base == "int":
            value = ("lit", _int_arg(p, shape))
        elif base == "int[]":
            value = ("lit", _int_list_arg(p, shape))
        elif base == "Scalar":
            value = ("lit", 2)
        elif base == "float":
            value = ("lit", 0.5)
        elif base == "bool":
            value = ("lit", False)
        elif base == "ScalarType":
            value = ("dtype", "float32")
        elif base == "Device":
            value = ("lit", "cpu")
        elif base == "str" and p.name == "equation":
            s = LETTERS[:len(shape)]
            value = ("lit", f"{s},{s}->{s[:-1]}")
        elif base == "str":
            value = ("lit", STR_ARGS[p.name])
        else:
            raise AssertionError(f"no argument for {p.type} {p.name} of {f.schema.full_name}")
        names.append(p.name)
        recipe.append(value)
    return names, recipe


def _shape_sets(n_tensors):
    """(shapes of the tensor arguments, description): a 0 in each position of 1-d to 3-d shapes,
    in every tensor at once and in each tensor alone."""
    sets = []
    for nd in (1, 2, 3):
        for pos in range(nd):
            empty = [FULL] * nd
            empty[pos] = 0
            full = [FULL] * nd
            sets.append(([tuple(empty)] * max(n_tensors, 1), f"{nd}d-zero@{pos}-all"))
            if n_tensors > 1:
                for i in range(n_tensors):
                    shapes = [tuple(full)] * n_tensors
                    shapes[i] = tuple(empty)
                    sets.append((shapes, f"{nd}d-zero@{pos}-arg{i}"))
    return sets


def _n_tensors(f):
    n = 0
    for p in f.schema.params:
        if p.type.base == "Tensor" and (not p.type.optional or p.name == "self"):
            n += 1
        elif p.type.base == "Tensor[]":
            n += 2
    return n


def _variants(f):
    vs = [v for v in f.variants if v in ("function", "method")]
    if f.is_pointwise and f.inplace and "method" in f.variants:
        vs.append("inplace")
    if f.is_pointwise:
        vs.append("out")
    return vs


def _cases(f):
    """Every (variant, names, recipe, id) of the sweep for f."""
    takes_dim = any(p.name == "dim" and p.type.base in ("int", "int[]") for p in f.schema.params)
    cases = []
    for main in ("float32", "int64"):
        for shapes, what in _shape_sets(_n_tensors(f)):
            dims = [None] + (list(range(len(shapes[0]))) if takes_dim else [])
            for dim in dims:
                names, recipe = _arguments(f, shapes, main, dim)
                for variant in _variants(f):
                    case_names, case_recipe = list(names), list(recipe)
                    if variant == "out":
                        case_names.append("out")
                        case_recipe.append(_tensor(main, (0,)))
                    cases.append((variant, case_names, case_recipe, f"{variant}-{main}-{what}-dim{dim}"))
    return cases


OUTCOMES = {"computed": 0, "both raised": 0}


def run_case(f, variant, names, recipe, outcomes, keyword_only=("out",)):
    """One call of f against torch (test_fuzz.run_both); the names in keyword_only are given by
    keyword. Counts the outcome in `outcomes`."""
    params = {p.name: p for p in f.schema.params}
    positional = [n for n in names if n not in keyword_only and not params[n].kwonly]
    if variant != "function":
        positional = positional or names[:1]
    keywords = [n for n in names if n not in positional]
    call = make_call(f, variant, positional, keywords, False)
    kres, tres = run_both(call, tuple(recipe), uninitialised=f.name in UNINITIALISED | RANDOM,
                          compare_inputs=not (f.name in RANDOM and f.name.endswith("_")),
                          allowed=ALLOWED(f, None, False))
    outcomes["both raised" if isinstance(tres, Exception) else "computed"] += 1


def sweep(f, cases, outcomes, keyword_only=("out",)):
    """Every (variant, names, recipe, id) of `cases` through run_case; fails listing the cases
    that differ from torch."""
    failures = []
    for variant, names, recipe, what in cases:
        try:
            run_case(f, variant, names, recipe, outcomes, keyword_only)
        except AssertionError as e:
            failures.append(f"{what}: {str(e).splitlines()[0][:300]}")
    assert not failures, f"{len(failures)} cases differ from torch:\n" + "\n".join(failures[:12])


@pytest.mark.parametrize("f", OPS, ids=[f.schema.full_name for f in OPS])
def test_zero_size(f):
    sweep(f, _cases(f), OUTCOMES)


# ops torch keeps in torch.nn.functional, by hand
FUNCTIONAL = {
    "gelu": lambda F, x: F.gelu(x),
    "gelu_tanh": lambda F, x: F.gelu(x, approximate="tanh"),
    "silu": lambda F, x: F.silu(x),
    "softplus": lambda F, x: F.softplus(x, beta=2.0),
    "one_hot": lambda F, x: F.one_hot(x.long(), 3),
}
# Python functions over private registry entries (swept by hand: the entries have no public name)
BY_HAND = {
    "unique_consecutive": lambda L, x: L.unique_consecutive(x, return_inverse=True, return_counts=True),
    "unique_consecutive_dim0": lambda L, x: L.unique_consecutive(x, dim=0, return_inverse=True, return_counts=True),
    "unique_consecutive_dim-1": lambda L, x: L.unique_consecutive(x, dim=-1),
    "unique_dim0": lambda L, x: L.unique(x, dim=0, return_inverse=True, return_counts=True),
    "unique": lambda L, x: L.unique(x, return_inverse=True, return_counts=True),
}


@pytest.mark.parametrize("name", list(BY_HAND))
def test_zero_size_by_hand(name):
    for shapes, what in _shape_sets(1):
        run_both(BY_HAND[name], (_tensor("float32", shapes[0]),))


@pytest.mark.parametrize("name", list(FUNCTIONAL))
def test_zero_size_functional(name):
    for shapes, what in _shape_sets(1):
        recipe = (_tensor("float32", shapes[0]),)
        run_both(lambda lib, x: FUNCTIONAL[name](lib.nn.functional, x), recipe)


def test_sweep_size():
    cases = sum(len(_cases(f)) for f in OPS) + (len(FUNCTIONAL) + len(BY_HAND)) * len(_shape_sets(1))
    print(f"zero-size sweep: {len(OPS)} registry entries, {len({f.name for f in OPS})} ops, {cases} cases"
          + (f"; so far {OUTCOMES['computed']} computed by both, {OUTCOMES['both raised']} raised by both"
             if sum(OUTCOMES.values()) else ""))
    assert len(OPS) > 150


# attention with no keys, no queries, or a value without elements: torch returns zeros of the
# query's batch and length and the value's width without looking at the other shapes
ATTENTION_SHAPES = [((2, 3, 4), (2, 0, 4), (2, 0, 5)), ((1, 2, 3, 4), (1, 2, 0, 4), (1, 2, 0, 4)),
                    ((2, 0, 4), (2, 2, 4), (2, 2, 5)), ((2, 0, 4), (3, 2, 3), (2, 3, 5)),
                    ((2, 3, 4), (2, 2, 4), (2, 0, 5)), ((2, 3, 4), (5, 0, 4), (2, 0, 5)),
                    ((2, 3, 4), (2, 2, 4), (0, 3, 5)), ((2, 3, 4), (2, 5, 4), (2, 5, 0)),
                    ((1, 3, 4), (2, 0, 4), (2, 0, 5)), ((2, 3, 0), (2, 5, 0), (2, 5, 4)),
                    ((2, 3, 4), (2, 0, 4), (2, 2, 5)), ((0, 3, 4), (2, 2, 4), (2, 2, 5))]


@pytest.mark.parametrize("q,k,v", ATTENTION_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_attention_empty(q, k, v, dtype):
    td = getattr(torch, dtype)
    ts = [torch.ones(*s, dtype=td, requires_grad=True) for s in (q, k, v)]
    ks = [kael.ones(*s, dtype=getattr(kael, dtype), requires_grad=True) for s in (q, k, v)]
    try:
        tres = torch.nn.functional.scaled_dot_product_attention(*ts)
    except RuntimeError:
        with pytest.raises((RuntimeError, ValueError)):
            kael.nn.functional.scaled_dot_product_attention(*ks)
        return
    kres = kael.nn.functional.scaled_dot_product_attention(*ks)
    check(kres, tres.detach())
    tres.sum().backward()
    kres.sum().backward()
    for kt, tt in zip(ks, ts):
        check(kt.grad, tt.grad)
