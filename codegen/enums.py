"""The enums that C++ and codegen share: dtypes and dispatch keys.

This module is their single source. Codegen validates YAML against these lists and
renders them into the generated header ``kael/enums.h`` (with the type-promotion table);
the Python names, Tensor conversion methods, stubs, error texts and test helpers all come
from here.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    name: str           # Python / YAML name: kael.float32
    enum: str           # C++ enumerator: ScalarType::Float32
    ctype: str          # C++ storage type
    itemsize: int
    category: int       # 0 bool, 1 integral, 2 floating
    signed: bool
    buffer_format: str  # struct/buffer-protocol format character ("" when there is none)
    aliases: tuple[str, ...] = ()  # other names of the dtype in the kael module (kael.float)
    method: str = ""    # Tensor conversion method (Tensor.float()), as in PyTorch


# The enum order. Promotion does not depend on it (see promote below).
DTYPES: tuple[DType, ...] = (
    DType("bool", "Bool", "bool", 1, 0, False, "?", (), "bool"),
    DType("uint8", "UInt8", "uint8_t", 1, 1, False, "B", (), "byte"),
    DType("int8", "Int8", "int8_t", 1, 1, True, "b", (), "char"),
    DType("int16", "Int16", "int16_t", 2, 1, True, "h", ("short",), "short"),
    DType("int32", "Int32", "int32_t", 4, 1, True, "i", ("int",), "int"),
    DType("int64", "Int64", "int64_t", 8, 1, True, "q", ("long",), "long"),
    DType("float16", "Float16", "Half", 2, 2, True, "e", ("half",), "half"),
    DType("bfloat16", "BFloat16", "BFloat16", 2, 2, True, "", (), "bfloat16"),
    DType("float32", "Float32", "float", 4, 2, True, "f", ("float",), "float"),
    DType("float64", "Float64", "double", 8, 2, True, "d", ("double",), "double"),
)

DTYPE_NAMES = tuple(d.name for d in DTYPES)
FLOATING_NAMES = tuple(d.name for d in DTYPES if d.category == 2)
INTEGRAL_NAMES = tuple(d.name for d in DTYPES if d.category == 1)
BY_NAME = {d.name: d for d in DTYPES}


def promote(a: DType, b: DType) -> DType:
    """PyTorch's promote_types for two dtypes (checked against torch by test_dtypes.py)."""
    if a == b:
        return a
    if a.category != b.category:
        return a if a.category > b.category else b
    if a.category == 1:
        if a.signed == b.signed:
            return a if a.itemsize >= b.itemsize else b
        u, s = (a, b) if not a.signed else (b, a)
        if s.itemsize > u.itemsize:
            return s
        # A signed type wide enough for the unsigned one (uint8 + int8 -> int16).
        return next(d for d in DTYPES if d.category == 1 and d.signed and d.itemsize > u.itemsize)
    # Floating: the two 16-bit formats meet in float32; otherwise the wider one.
    if a.itemsize == b.itemsize:
        return BY_NAME["float32"]
    return a if a.itemsize > b.itemsize else b


# PROMOTION[i][j]: the promoted dtype of DTYPES[i] and DTYPES[j].
PROMOTION: tuple[tuple[DType, ...], ...] = tuple(tuple(promote(a, b) for b in DTYPES) for a in DTYPES)

# Dispatch keys from lowest to highest priority. A kernel registered for an alias key
# is registered for every key the alias names.
# Python (the __torch_dispatch__-style key) sees every op below autograd. Autocast, above
# autograd, is on the thread's included keys while autocast is enabled: the ops of its table
# (aten/src/autocast/autocast.cpp) cast their arguments there, every other op falls through.
DISPATCH_KEYS: tuple[str, ...] = ("CPU", "CUDA", "Python", "Autograd", "Autocast")
BACKEND_KEYS: tuple[str, ...] = ("CPU", "CUDA")
# Keys whose slots, without a kernel, fall through (or call a registered boxed fallback).
FALLTHROUGH_KEYS: tuple[str, ...] = ("Python", "Autograd", "Autocast")
ALIAS_KEYS: dict[str, tuple[str, ...]] = {
    # One device-agnostic kernel for every backend; autograd needs a derivative for the op.
    "CompositeExplicit": BACKEND_KEYS,
    # A kernel that only calls other ops: it runs at every key, above autograd, so autograd
    # and the Python key see the ops it calls and the op needs no derivative of its own.
    # Autocast is not among them: an op without an autocast kernel falls through it.
    "CompositeImplicit": tuple(k for k in DISPATCH_KEYS if k != "Autocast"),
}
