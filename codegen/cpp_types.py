"""The C++ types codegen writes for registry parameters and results: which type model entry a
parameter takes (a Tensor of a two-input pointwise op is an Operand; a Scalar that a sibling
overload takes as a Tensor also takes a 0-d tensor), its C++ spelling with and without a
default, the boxed type, the result type, and the order in which overloads are tried."""
from __future__ import annotations

from codegen import types
from codegen.model import NativeFunction, Param

# (op name, parameter name) of the parameters some overload of the op takes as a Tensor; set by
# generate() from the whole registry.
_TENSOR_PARAMS: set[tuple[str, str]] = set()


def overload_order(f: NativeFunction) -> int:
    """Overloads are tried in this order: those taking a Tensor where a sibling takes a Scalar
    first, as PyTorch's parser does (a 0-d tensor then matches the Tensor overload)."""
    return sum(1 for p in f.schema.params
               if (p.type.is_scalar() or p.type.is_float()) and (f.name, p.name) in _TENSOR_PARAMS)


def arg_type(f: NativeFunction, p: Param) -> types.ArgType:
    """The type model entry of a parameter (Tensor inputs of two-input pointwise ops are Operands;
    a Scalar that another overload takes as a Tensor also takes a 0-d tensor)."""
    if p.type.is_tensor() and f.operand_inputs:
        return types.OPERAND
    if p.type.is_scalar() and (f.name, p.name) in _TENSOR_PARAMS:
        return types.SCALAR_OR_0D_TENSOR
    if p.type.is_float() and (f.name, p.name) in _TENSOR_PARAMS:
        return types.FLOAT_OR_0D_TENSOR
    return p.type.arg_type


def cpp_type(f: NativeFunction, p: Param) -> str:
    t = arg_type(f, p)
    if p.type.optional:
        # no optional of a reference
        return f"const std::optional<{t.cpp_value}>&" if t.optional_by_ref else f"std::optional<{t.cpp_param}>"
    return t.cpp_param


def cpp_default(p: Param) -> str:
    d = p.default
    assert d is not None
    if d == "None":
        return "std::nullopt"
    return p.type.arg_type.cpp_default(d)


def cpp_params(f: NativeFunction, *, defaults: bool, inplace: bool = False, names: bool = True) -> str:
    out = []
    for p in f.schema.params:
        t = cpp_type(f, p)
        if inplace and p.name == "self":
            t = "const Tensor&"
        text = f"{t} {p.name}" if names else t
        if defaults and p.has_default and p.type.has_cpp_default(p.default):
            text += f" = {cpp_default(p)}"
        out.append(text)
    # a default may only be given if all later params have one too
    if defaults:
        fixed: list[str] = []
        allowed = True
        for text in reversed(out):
            if "=" not in text:
                allowed = False
            elif not allowed:
                text = text.split(" = ")[0]
            fixed.append(text)
        out = list(reversed(fixed))
    return ", ".join(out)


def unbox_type(f: NativeFunction, p: Param) -> str:
    """The C++ type a boxed call unboxes a parameter to (the value type of its ABI type)."""
    t = arg_type(f, p)
    base = t.cpp_param if t.name in types.VIEW_TYPES else t.cpp_value
    return f"std::optional<{base}>" if p.type.optional else base


def cpp_return(f: NativeFunction) -> str:
    """The C++ result type of the functional op: each result's value type (a std::tuple of several);
    an op that writes its argument returns it by reference."""
    if f.schema.mutating:
        return "const Tensor&"
    if f.schema.returns_nothing:
        return "void"
    values = [r.type.arg_type.cpp_value for r in f.schema.returns]
    return values[0] if len(values) == 1 else "std::tuple<" + ", ".join(values) + ">"


def cpp_args(f: NativeFunction) -> str:
    return ", ".join(p.name for p in f.schema.params)
