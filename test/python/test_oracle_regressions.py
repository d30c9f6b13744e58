"""Differences from torch found by differential fuzzing, each compared against torch itself."""
import warnings

import pytest
import torch

import kael


def outcome(lib, call):
    """('ok', dtype name, shape, values) or ('raise', exception class name) for call(lib)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            r = call(lib)
        except Exception as e:  # noqa: BLE001 - the class is what is compared
            base = RuntimeError if isinstance(e, RuntimeError) else type(e)  # NotImplementedError is one
            return ("raise", base.__name__)
    if isinstance(r, (list, tuple)):
        return [outcome(lib, lambda _l, x=x: x) for x in r]
    return ("ok", str(r.dtype).split(".")[1], list(r.shape), r.tolist())


def same(call):
    want, got = outcome(torch, call), outcome(kael, call)
    assert got == want


# ---- clamp

@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64"])
@pytest.mark.parametrize("bounds", [(-7, 4.0), (300, 1000.0), (2**31, 0.1), (0.5, 2**31), (-3.5, 7), (1, 4)], ids=str)
def test_clamp_with_an_int_and_a_float_bound_promotes_before_converting(dtype, bounds):
    same(lambda lib: lib.clamp(lib.tensor([0, 3, 100], dtype=getattr(lib, dtype)), min=bounds[0], max=bounds[1]))


@pytest.mark.parametrize("case", ["both", "min", "max", "0-d", "broadcast", "int self float bound", "bad shape"])
def test_clamp_in_place_with_tensor_bounds(case):
    def call(lib):
        x = lib.tensor([0.5, -1.0, 3.0]) if case != "int self float bound" else lib.tensor([1, 5, -2])
        kw = {
            "both": dict(min=lib.tensor([0.0, 0.0, 0.0]), max=lib.tensor([2.0, 2.0, 2.0])),
            "min": dict(min=lib.tensor([0.0, 0.0, 4.0])),
            "max": dict(max=lib.tensor([0.0, 0.0, 4.0])),
            "0-d": dict(min=lib.tensor(0.0), max=lib.tensor(2.0)),
            "broadcast": dict(min=lib.tensor([[0.0], [1.0]])),
            "int self float bound": dict(min=lib.tensor([0.5, 0.5, 0.5])),
            "bad shape": dict(min=lib.tensor([0.0, 0.0])),
        }[case]
        r = x.clamp_(**kw)
        assert r is x
        return x
    if case in ("broadcast", "bad shape"):
        # shape errors are ValueError in kael (docs/decisions.md, "Errors"), RuntimeError in torch
        with pytest.raises(RuntimeError):
            call(torch)
        with pytest.raises(ValueError):
            call(kael)
        return
    same(call)


@pytest.mark.parametrize("call", [
    lambda lib: lib.clamp(lib.tensor([True, False]), min=lib.tensor(True)),
    lambda lib: lib.clamp_min(lib.tensor([True, False]), lib.tensor([False, True])),
    lambda lib: lib.clamp_max(lib.tensor([True, False]), lib.tensor([False, True])),
    lambda lib: lib.clamp(lib.tensor([True, False]), min=lib.tensor(False), max=lib.tensor([False, True])),
    lambda lib: lib.clamp(lib.tensor([True, False]), min=True),
    lambda lib: lib.clamp_min(lib.tensor([True, False]), True),
    lambda lib: lib.clamp_max(lib.tensor([True, False]), False),
    lambda lib: lib.clamp(lib.tensor([True, False]), min=1),
    lambda lib: lib.clamp(lib.tensor([True, False]), min=lib.tensor(1)),
], ids=["min-0d", "min", "max", "both", "py-bool", "min-py-bool", "max-py-bool", "py-int", "int-tensor"])
def test_clamp_of_bool_tensors_as_torch(call):
    same(call)


# ---- integer division by a number that wraps to 0

@pytest.mark.parametrize("op", ["floor_divide", "remainder", "fmod"])
@pytest.mark.parametrize("dtype,divisor", [("uint8", 256), ("uint8", 512), ("int32", 2**32), ("uint8", 300),
                                           ("int32", 2**32 + 3), ("uint8", 0), ("int64", 2**32)], ids=str)
def test_integer_division_by_a_number_that_converts_to_zero_raises(op, dtype, divisor):
    same(lambda lib: getattr(lib, op)(lib.tensor([1, 10, 200], dtype=getattr(lib, dtype)), divisor))
