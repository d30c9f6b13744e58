"""The one model of argument types: everything codegen knows about a type is declared here.

Each ``ArgType`` says, once, how a registry type is spelled in C++ (value and parameter
type), how the Python binding parses it (parser kind and converter), which defaults it
accepts and how a default is written in C++, and how it appears in ``_C.pyi``. The schema
parser, the C++ signatures, the generated parsers, the ``ParamKind`` enum of the binding and
the stubs are all derived from this table; nothing else spells a type out.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from codegen import enums

# The most parameters a generated parser handles (the binding's ``kMaxParams``, generated).
MAX_PARAMS = 12


def _number_default(text: str) -> str:
    return text if ("." in text or "e" in text) else text + ".0"


def _scalar_default(text: str) -> str:
    if text in ("True", "False"):
        return "true" if text == "True" else "false"
    return text


def _dtype_default(text: str) -> str:
    return f"ScalarType::{next(d.enum for d in enums.DTYPES if d.name == text)}"


@dataclass(frozen=True)
class ArgType:
    name: str                   # registry spelling: Tensor, Scalar, int, ...
    cpp_value: str              # C++ type that holds a value: Tensor, std::int64_t, ...
    cpp_param: str              # C++ parameter type of the dispatcher ABI
    parser_kind: str            # enumerator of ParamKind in the binding's generated header
    converter: str | None       # csrc converter the parser calls (None: parsed specially)
    default_pattern: str | None  # regex of valid (non-None) defaults; None: no default but None
    cpp_default: Callable[[str], str]  # YAML default text -> C++ expression
    stub: str                   # type in _C.pyi
    doc: str                    # what Python accepts, for codegen/README.md


TYPES: dict[str, ArgType] = {t.name: t for t in (
    ArgType("Tensor", "Tensor", "const Tensor&", "Tensor", "conv_tensor", None, str, "Tensor",
            "a `kael.Tensor`"),
    ArgType("Scalar", "Scalar", "const Scalar&", "Scalar", "conv_scalar",
            r"-?\d+(\.\d*)?(e-?\d+)?|True|False", _scalar_default, "Number",
            "a Python `bool`, `int` or `float`"),
    ArgType("int", "std::int64_t", "std::int64_t", "Int", "conv_int", r"-?\d+", str, "int",
            "an integer (or an object with `__index__`)"),
    ArgType("float", "double", "double", "Float", "conv_float", r"-?\d+(\.\d*)?(e-?\d+)?", _number_default,
            "float", "a real number"),
    ArgType("bool", "bool", "bool", "Bool", "conv_bool", r"True|False",
            lambda t: "true" if t == "True" else "false", "bool", "a `bool`"),
    ArgType("int[]", "DimVector", "IntArrayRef", "IntList", None, r"\[\s*(-?\d+\s*(,\s*-?\d+\s*)*)?\]",
            lambda t: "IntArrayRef{}" if t.replace(" ", "") == "[]" else "{" + t.strip()[1:-1] + "}",
            "Sequence[int] | int", "a sequence of ints, or one int"),
    ArgType("ScalarType", "ScalarType", "ScalarType", "ScalarType", "conv_dtype",
            "|".join(re.escape(n) for n in enums.DTYPE_NAMES), _dtype_default, "dtype | str",
            "a kael dtype (`kael.float32`) or its name"),
    ArgType("Device", "Device", "Device", "Device", "conv_device", r"cpu", lambda t: "kCPU", "str",
            "a device string (`\"cpu\"`)"),
    ArgType("Tensor[]", "std::vector<Tensor>", "TensorList", "TensorList", None, None, str,
            "Sequence[Tensor]", "a list or tuple of `kael.Tensor`s"),
    ArgType("str", "std::string", "std::string_view", "String", "conv_string", r"'[^'\\\"]*'",
            lambda t: '"' + t[1:-1] + '"', "str", "a `str`"),
    ArgType("Generator", "Generator", "Generator", "Generator", "conv_generator", None, str, "Generator",
            "a `kael.Generator` (only `None` as a default)"),
)}

# Types whose boxed and parsed form is the ABI (view) type over a buffer the caller owns.
VIEW_TYPES = ("int[]", "Tensor[]", "str")
# A Scalar parameter in whose place another overload of the op takes a Tensor (clamp's min and
# max) also takes a 0-d tensor, as in PyTorch, whose parser tries the Tensor overload first.
SCALAR_OR_0D_TENSOR = ArgType("Scalar", "Scalar", "const Scalar&", "Scalar", "conv_scalar_or_0d_tensor",
                              TYPES["Scalar"].default_pattern, _scalar_default, "Number | Tensor",
                              "a Python `bool`, `int` or `float`, or a 0-d `kael.Tensor`")

# So does a float parameter that another overload takes as a Tensor (normal's mean and std:
# normal(0.0, kael.tensor(1.), (3,)) is normal.float_float, as PyTorch's parser reads it).
FLOAT_OR_0D_TENSOR = ArgType("float", "double", "double", "Float", "conv_float_or_0d_tensor",
                             TYPES["float"].default_pattern, _number_default, "float | Tensor",
                             "a real number, or a 0-d `kael.Tensor`")

# A Tensor input of a pointwise op of two tensor inputs also takes a number: kael::Operand.
OPERAND = ArgType("Operand", "Operand", "const Operand&", "Operand", "conv_operand", None, str, "Tensor | Number",
                  "a `kael.Tensor` or a Python number")

# Parser kinds in enum order (the generated ParamKind).
PARSER_KINDS: tuple[str, ...] = tuple(dict.fromkeys([t.parser_kind for t in TYPES.values()] + [OPERAND.parser_kind]))


def check_default(type_name: str, optional: bool, text: str) -> bool:
    if text == "None":
        return optional
    pattern = TYPES[type_name].default_pattern
    return pattern is not None and re.fullmatch(pattern, text) is not None
