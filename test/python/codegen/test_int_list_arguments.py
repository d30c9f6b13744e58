"""One int for an int list, as PyTorch's parser takes it: where the list has a size (int[2]
stride=1), or as the spread arguments of a list that is the only positional parameter
(x.view(6), x.flip(0), kael.zeros(3)); otherwise (tile(x, 2), flip(x, 0), reshape(x, 6)) a
TypeError, as torch's. Every public registry entry with an int[] parameter of no size has a
call here that passes one int for it, compared with torch: the class, or both succeed with the
same shape."""
import warnings
from pathlib import Path

import pytest
import torch

import kael
from codegen.model import parse_registry

ROOT = Path(__file__).resolve().parents[3]


def _x(lib):
    return lib.arange(6.0).reshape(2, 3)


# registry entry -> calls that pass one int for its unsized int[] (functions and methods)
CALLS = {
    "empty": [lambda lib: lib.empty(3)],
    "empty_strided": [lambda lib: lib.empty_strided(3, 1), lambda lib: lib.empty_strided((3,), 1)],
    "zeros": [lambda lib: lib.zeros(3)],
    "ones": [lambda lib: lib.ones(3)],
    "full": [lambda lib: lib.full(3, 1.0)],
    "as_strided": [lambda lib: lib.as_strided(_x(lib), 3, 1), lambda lib: _x(lib).as_strided(3, 1)],
    "view": [lambda lib: _x(lib).view(6)],
    "reshape": [lambda lib: lib.reshape(_x(lib), 6), lambda lib: _x(lib).reshape(6)],
    "broadcast_to": [lambda lib: lib.broadcast_to(lib.ones(1), 3), lambda lib: lib.ones(1).broadcast_to(3)],
    "permute": [lambda lib: lib.permute(lib.ones(3), 0), lambda lib: lib.ones(3).permute(0)],
    "expand": [lambda lib: lib.ones(1).expand(3)],
    "rand": [lambda lib: lib.rand(3)],
    "randn": [lambda lib: lib.randn(3)],
    "randint": [lambda lib: lib.randint(5, 3)],
    "randint.low": [lambda lib: lib.randint(0, 5, 3)],
    "normal.float_float": [lambda lib: lib.normal(0.0, 1.0, 3)],
    "layer_norm": [lambda lib: lib.layer_norm(_x(lib), 3), lambda lib: lib.nn.functional.layer_norm(_x(lib), 3)],
    "repeat": [lambda lib: _x(lib).repeat(2)],
    "tile": [lambda lib: lib.tile(_x(lib), 2), lambda lib: _x(lib).tile(2)],
    "flip": [lambda lib: lib.flip(_x(lib), 0), lambda lib: _x(lib).flip(0)],
    "rot90": [lambda lib: lib.rot90(_x(lib), 1, 0), lambda lib: _x(lib).rot90(1, 0)],
    "unflatten": [lambda lib: lib.unflatten(_x(lib), 1, 3), lambda lib: _x(lib).unflatten(1, 3)],
    "movedim": [lambda lib: lib.movedim(_x(lib), 0, 1), lambda lib: _x(lib).movedim(0, 1),
                lambda lib: lib.movedim(_x(lib), [0], 1)],
    "moveaxis": [lambda lib: lib.moveaxis(_x(lib), 0, 1), lambda lib: _x(lib).moveaxis(0, 1)],
    "split.sizes": [lambda lib: lib.split(_x(lib), 1), lambda lib: _x(lib).split(1)],
    "split_with_sizes": [lambda lib: lib.split_with_sizes(_x(lib), 2), lambda lib: _x(lib).split_with_sizes(2)],
    "tensor_split.indices": [lambda lib: lib.tensor_split(_x(lib), 2), lambda lib: _x(lib).tensor_split(2)],
    "hsplit.array": [lambda lib: lib.hsplit(_x(lib), 3)],
    "vsplit.array": [lambda lib: lib.vsplit(_x(lib), 2)],
    "dsplit.array": [lambda lib: lib.dsplit(lib.ones(1, 1, 2), 2)],
    "tensordot": [lambda lib: lib.tensordot(_x(lib), _x(lib).t(), 1),
                  lambda lib: lib.tensordot(_x(lib), _x(lib).t(), (1, 0))],
    "sum_to_size": [lambda lib: lib.ones(3).sum_to_size(3)],
    "convolution": [lambda lib: lib.convolution(lib.ones(1, 1, 3), lib.ones(1, 1, 1), None, 1, [0], [1], False, [0], 1)],
}
# kael's own (no torch op of that name); private entries and backward kernels are left out below
NOT_TORCH = {"standardize"}


def _unsized_int_list_entries():
    registry = parse_registry((ROOT / "native_functions.yaml").read_text(), "native_functions.yaml")
    names = set()
    for f in registry:
        if f.name.startswith("_") or "_backward" in f.name or f.name in NOT_TORCH:
            continue
        if any(p.type.is_int_list() and not p.type.takes_one_int() for p in f.schema.params):
            names.add(f"{f.name}.{f.schema.overload}" if f.schema.overload else f.name)
    return names


def test_every_entry_with_an_unsized_int_list_has_calls():
    entries = _unsized_int_list_entries()
    assert sorted(entries - set(CALLS)) == []
    assert sorted(set(CALLS) - entries) == []


def _outcome(lib, call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            r = call(lib)
        except Exception as e:  # noqa: BLE001 - the class is what is compared
            return ("raise", "RuntimeError" if isinstance(e, RuntimeError) else type(e).__name__)
    return ("ok", [tuple(t.shape) for t in r] if isinstance(r, (tuple, list)) else tuple(r.shape))


@pytest.mark.parametrize("name,index", [(n, i) for n, calls in CALLS.items() for i in range(len(calls))])
def test_one_int_for_an_int_list_as_torch(name, index):
    call = CALLS[name][index]
    assert _outcome(kael, call) == _outcome(torch, call)
