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
MAX_PARAMS = 16


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
    optional_by_ref: bool = False  # optional form passed as const std::optional<T>& (no optional reference)


TYPES: dict[str, ArgType] = {t.name: t for t in (
    ArgType("Tensor", "Tensor", "const Tensor&", "Tensor", "conv_tensor", None, str, "Tensor",
            "a `kael.Tensor`", optional_by_ref=True),
    ArgType("Scalar", "Scalar", "const Scalar&", "Scalar", "conv_scalar",
            r"-?\d+(\.\d*)?(e-?\d+)?|True|False", _scalar_default, "Number",
            "a Python `bool`, `int` or `float`", optional_by_ref=True),
    ArgType("int", "std::int64_t", "std::int64_t", "Int", "conv_int", r"-?\d+", str, "int",
            "an integer (or an object with `__index__`)"),
    ArgType("float", "double", "double", "Float", "conv_float", r"-?\d+(\.\d*)?(e-?\d+)?", _number_default,
            "float", "a real number"),
    ArgType("bool", "bool", "bool", "Bool", "conv_bool", r"True|False",
            lambda t: "true" if t == "True" else "false", "bool", "a `bool`"),
    ArgType("int[]", "DimVector", "IntArrayRef", "IntList", None, r"\[\s*(-?\d+\s*(,\s*-?\d+\s*)*)?\]",
            lambda t: "IntArrayRef{}" if t.replace(" ", "") == "[]" else "{" + t.strip()[1:-1] + "}",
            "Sequence[int] | int", "a sequence of ints; one int too where the list has a size (`int[2]`)"),
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
                              "a Python `bool`, `int` or `float`, or a 0-d `kael.Tensor`",
                              optional_by_ref=True)

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


def is_empty_list_default(text: str | None) -> bool:
    """Whether a default is the empty list `[]` (PyTorch's binding also takes None for it)."""
    return text is not None and text.replace(" ", "") == "[]"


# ---------------------------------------------------------------------------- schema types
#
# A registry type is an object, as in torchgen: a BaseType (Tensor, Scalar, int, ...), a
# ListType of one (int[], int[2], Tensor[]) or an OptionalType around either (int[]?). The
# alias annotation of a Tensor (`Tensor(a)`, `Tensor(a!)`, `Tensor(a!)[]`) belongs to the
# argument or return that carries it (Annotation). Generators ask these objects questions
# (is_tensor(), is_int_list(), ...); only this module compares type names.

BASE_NAMES = ("Tensor", "Scalar", "int", "float", "bool", "ScalarType", "Device", "str", "Generator")
# The element types a list may have.
LIST_ELEMS = ("Tensor", "int")


@dataclass(frozen=True)
class Annotation:
    """An alias annotation: `a` (the value aliases an input: a view) or `a!` (written in place)."""
    alias_set: str
    is_write: bool

    @staticmethod
    def parse(text: str) -> "Annotation":
        m = re.fullmatch(r"([a-z])(!?)", text)
        if not m:
            raise ValueError(f"bad alias annotation '{text}'")
        return Annotation(m.group(1), bool(m.group(2)))

    def __str__(self) -> str:
        return self.alias_set + ("!" if self.is_write else "")


class SchemaType:
    """A registry type. `str()` is the spelling users read in signatures (a list's size hint left
    out: `int[1]?` reads `int[]?`); `spelling()` keeps the size."""

    @staticmethod
    def parse(text: str) -> "SchemaType":
        """Parses a type without annotation; raises ValueError for an unknown one."""
        if text.endswith("?"):
            return OptionalType(SchemaType._parse_plain(text[:-1], text))
        return SchemaType._parse_plain(text, text)

    @staticmethod
    def _parse_plain(text: str, whole: str) -> "SchemaType":
        m = re.fullmatch(r"([A-Za-z]+)(?:\[(\d*)\])?", text)
        if not m or m.group(1) not in BASE_NAMES:
            raise ValueError(f"unknown type '{whole}'")
        elem = BaseType(m.group(1))
        if m.group(2) is None:
            return elem
        if elem.name not in LIST_ELEMS or (m.group(2) and elem.name != "int"):
            raise ValueError(f"unknown type '{whole}'")
        return ListType(elem, int(m.group(2)) if m.group(2) else None)

    # -- structure
    @property
    def optional(self) -> bool:
        return isinstance(self, OptionalType)

    def unwrap(self) -> "SchemaType":
        """The type without its optional: int[]? -> int[]."""
        return self.elem if isinstance(self, OptionalType) else self  # type: ignore[attr-defined]

    @property
    def base(self) -> str:
        """The key of the type table (TYPES): Tensor for Tensor?, int[] for int[2]."""
        t = self.unwrap()
        if isinstance(t, ListType):
            return t.elem.name + "[]"
        assert isinstance(t, BaseType)
        return t.name

    @property
    def arg_type(self) -> ArgType:
        return TYPES[self.base]

    # -- questions generators ask
    def _is(self, name: str) -> bool:
        t = self.unwrap()
        return isinstance(t, BaseType) and t.name == name

    def _is_list_of(self, name: str) -> bool:
        t = self.unwrap()
        return isinstance(t, ListType) and t.elem.name == name

    def is_tensor(self) -> bool:
        """Tensor or Tensor? (not a list)."""
        return self._is("Tensor")

    def is_tensor_list(self) -> bool:
        return self._is_list_of("Tensor")

    def is_tensor_like(self) -> bool:
        """A tensor or a list of them: contributes to the dispatch key set and gets edges."""
        return self.is_tensor() or self.is_tensor_list()

    def is_int_list(self) -> bool:
        return self._is_list_of("int")

    def takes_one_int(self) -> bool:
        """An int list with a size (int[2] stride): Python may pass one int for it, as PyTorch's
        parser allows; an unsized int[] takes a sequence only (or spread arguments)."""
        t = self.unwrap()
        return isinstance(t, ListType) and t.elem.name == "int" and t.size is not None

    def is_scalar(self) -> bool:
        return self._is("Scalar")

    def is_plain_value(self) -> bool:
        """bool or int, not optional: the types an op may return besides tensors (is_nonzero,
        numel)."""
        return not self.optional and (self._is("bool") or self._is("int"))

    def is_float(self) -> bool:
        return self._is("float")

    def is_device(self) -> bool:
        return self._is("Device")

    def has_cpp_default(self, default: str) -> bool:
        """Whether the C++ declaration can carry the default: a list other than `[]` cannot (an
        IntArrayRef over a temporary array would dangle); its Python parser still applies it."""
        return not (self.is_int_list() and not is_empty_list_default(default))

    def spelling(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class BaseType(SchemaType):
    name: str

    def __str__(self) -> str:
        return self.name

    def spelling(self) -> str:
        return self.name


@dataclass(frozen=True)
class ListType(SchemaType):
    elem: BaseType
    size: int | None = None   # int[2]: a size hint (Python still takes any length, or one int)

    def __str__(self) -> str:
        return f"{self.elem}[]"

    def spelling(self) -> str:
        return f"{self.elem}[{'' if self.size is None else self.size}]"


@dataclass(frozen=True)
class OptionalType(SchemaType):
    elem: SchemaType

    def __str__(self) -> str:
        return f"{self.elem}?"

    def spelling(self) -> str:
        return f"{self.elem.spelling()}?"


TENSOR = BaseType("Tensor")
BOOL = BaseType("bool")


def parse_annotated(text: str) -> tuple[SchemaType, Annotation | None]:
    """Parses `Tensor(a!)`, `Tensor(a)`, `Tensor(a!)[]` or a plain type into (type, annotation).
    Only tensors carry annotations."""
    m = re.fullmatch(r"Tensor\(([^)]*)\)(.*)", text)
    if not m:
        return SchemaType.parse(text), None
    try:
        annotation = Annotation.parse(m.group(1))
    except ValueError:
        raise ValueError(f"unknown type '{text}'") from None
    try:
        t = SchemaType.parse("Tensor" + m.group(2))
    except ValueError:
        raise ValueError(f"unknown type '{text}'") from None
    if t.optional:
        raise ValueError(f"unknown type '{text}'")
    return t, annotation


def annotated_str(t: SchemaType, annotation: Annotation | None) -> str:
    """A type as signatures show it, with its annotation: Tensor(a!), Tensor(a!)[], int[]?."""
    if annotation is None:
        return str(t)
    return str(t).replace("Tensor", f"Tensor({annotation})", 1)
