"""The enums that C++ and codegen share: dtypes and dispatch keys.

This module is their single source. Codegen validates YAML against these lists and
renders them into the generated header ``kael/enums.h``; nothing else spells them out.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    name: str        # Python / YAML name: kael.float32
    enum: str        # C++ enumerator: ScalarType::Float32
    ctype: str       # C++ element type
    itemsize: int
    category: int    # 0 bool, 1 integral, 2 floating (promotion order within category by rank)
    rank: int        # position in the promotion lattice (total order for the supported types)
    buffer_format: str  # struct/buffer-protocol format character


# Order is the promotion order: promote(a, b) is the one with the larger rank.
DTYPES: tuple[DType, ...] = (
    DType("bool", "Bool", "bool", 1, 0, 0, "?"),
    DType("int64", "Int64", "int64_t", 8, 1, 1, "q"),
    DType("float32", "Float32", "float", 4, 2, 2, "f"),
    DType("float64", "Float64", "double", 8, 2, 3, "d"),
)

# Dispatch keys from lowest to highest priority. A kernel registered for an alias key
# is registered for every key the alias names.
# Python (the __torch_dispatch__-style key) sees every op below autograd.
DISPATCH_KEYS: tuple[str, ...] = ("CPU", "CUDA", "Python", "Autograd")
BACKEND_KEYS: tuple[str, ...] = ("CPU", "CUDA")
# Keys whose slots, without a kernel, fall through (or call a registered boxed fallback).
FALLTHROUGH_KEYS: tuple[str, ...] = ("Python", "Autograd")
ALIAS_KEYS: dict[str, tuple[str, ...]] = {
    # One device-agnostic kernel for every backend; autograd needs a derivative for the op.
    "CompositeExplicit": BACKEND_KEYS,
    # A kernel that only calls other ops: it runs at every key, above autograd, so autograd
    # and the Python key see the ops it calls and the op needs no derivative of its own.
    "CompositeImplicit": DISPATCH_KEYS,
}

DTYPE_NAMES = tuple(d.name for d in DTYPES)
