"""The registry model: YAML entries parsed into frozen dataclasses, validated strictly.

Every key of an entry is popped as it is read; leftovers are an error. Errors are
``CodegenError`` and read ``native_functions.yaml:123: add.Tensor: unknown type 'Tensr'``.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from codegen import enums, types


class CodegenError(Exception):
    """A malformed registry entry. The message names file, line and entry."""


# ---------------------------------------------------------------------------- types

# The type objects live in codegen/types.py (BaseType, ListType, OptionalType, Annotation);
# `Type.parse("int[2]?")` is OptionalType(ListType(BaseType("int"), 2)).
Type = types.SchemaType


def _parse_type(text: str) -> tuple[types.SchemaType, types.Annotation | None]:
    try:
        return types.parse_annotated(text)
    except ValueError as e:
        raise CodegenError(str(e)) from None


@dataclass(frozen=True)
class Param:
    name: str
    type: types.SchemaType
    default: str | None      # YAML default text, normalised; None when required
    kwonly: bool
    annotation: types.Annotation | None = None  # Tensor(a!): the argument is written in place

    @property
    def has_default(self) -> bool:
        return self.default is not None

    @property
    def is_write(self) -> bool:
        """Tensor(a!) or Tensor(a!)[]: the op writes this argument."""
        return self.annotation is not None and self.annotation.is_write

    @property
    def has_empty_list_default(self) -> bool:
        return types.is_empty_list_default(self.default)

    @property
    def type_text(self) -> str:
        """The type as signatures show it: `Tensor(a!)` with its annotation, no list size."""
        return types.annotated_str(self.type, self.annotation)


@dataclass(frozen=True)
class Return:
    """One result: `Tensor`, `Tensor(a)` (a view of an input), `Tensor(a!)` (the input written in
    place), `Tensor[]`, or one named member of a tuple return (`Tensor values`)."""
    name: str | None
    type: types.SchemaType
    annotation: types.Annotation | None = None

    @property
    def is_write(self) -> bool:
        return self.annotation is not None and self.annotation.is_write

    @property
    def is_view(self) -> bool:
        return self.annotation is not None and not self.annotation.is_write

    def __str__(self) -> str:
        text = types.annotated_str(self.type, self.annotation)
        return f"{text} {self.name}" if self.name else text


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _check_default(t: Type, text: str) -> str:
    """Validates a default for its type and returns its normal form."""
    if text == "None" and not t.optional:
        raise CodegenError(f"default None for non-optional type '{t}'")
    if not types.check_default(t.base, t.optional, text):
        raise CodegenError(f"bad default '{text}' for type '{t}'")
    return text


def _split_args(args: str) -> list[str]:
    """Splits an argument list at top-level commas: not inside brackets (an int[] default
    `[0, 1]`), parentheses (`Tensor(a!)`) or a quoted string default."""
    parts: list[str] = []
    depth = 0
    quote = False
    current = ""
    for ch in args:
        if ch == "'":
            quote = not quote
        elif not quote:
            depth += ch in "[("
            depth -= ch in "])"
        if ch == "," and depth == 0 and not quote:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip() or parts:
        parts.append(current.strip())
    return parts


def _parse_params(args: str) -> list[Param]:
    """The argument list, split at top-level commas (brackets and quotes respected, so an int[]
    default `[0, 1]` and a string default with a comma are one argument each)."""
    params: list[Param] = []
    kwonly = False
    seen: set[str] = set()
    args_list = _split_args(args)
    for index, raw in enumerate(args_list):
        if raw == "*":
            if kwonly:
                raise CodegenError("'*' appears twice")
            if index == len(args_list) - 1:
                raise CodegenError("'*' must be followed by keyword-only arguments")
            kwonly = True
            continue
        pm = re.fullmatch(r"(\S+)\s+([A-Za-z_][A-Za-z0-9_]*)(?:\s*=\s*(.+))?", raw)
        if not pm:
            raise CodegenError(f"cannot parse argument '{raw}'")
        ptype, annotation = _parse_type(pm.group(1))
        pname = pm.group(2)
        writes = annotation is not None and annotation.is_write
        if writes and not ptype.is_tensor_list() and (params or pname != "self"):
            raise CodegenError("only the first argument, 'self', can be Tensor(a!)")
        if pname == "input":
            raise CodegenError("argument name 'input' is reserved (Python shows 'self' as 'input')")
        if pname in seen:
            raise CodegenError(f"duplicate argument name '{pname}'")
        seen.add(pname)
        default = _check_default(ptype, pm.group(3).strip()) if pm.group(3) else None
        if params and params[-1].has_default and default is None and not kwonly:
            raise CodegenError(f"argument '{pname}' without default follows one with a default")
        params.append(Param(pname, ptype, default, kwonly, annotation))
    return params


_RETURN_FORMS = ("Tensor, Tensor(a), Tensor(a!), Tensor[], (Tensor name, Tensor name, ...), "
                 "(Tensor, Tensor, ...), bool, int or ()")


def _parse_returns(returns: str) -> tuple[Return, ...]:
    """`Tensor`, `Tensor(a)`, `Tensor(a!)`, `Tensor[]`, `(Tensor values, Tensor indices)` (a named
    tuple in Python) or `(Tensor, Tensor)` (a plain tuple, as torch.var_mean returns); `()` for an
    op that only writes its Tensor(a!)[] arguments (None in Python, as torch._fused_adam_)."""
    if re.fullmatch(r"\(\s*\)", returns):
        return ()
    if returns.startswith("("):
        out = []
        for part in returns[1:-1].split(","):
            rm = re.fullmatch(r"\s*(\S+)(?:\s+([A-Za-z_][A-Za-z0-9_]*))?\s*", part)
            t = annotation = None
            if rm:
                try:
                    t, annotation = types.parse_annotated(rm.group(1))
                except ValueError:
                    t = None
            if t is None or not t.is_tensor() or t.optional or annotation is not None:
                raise CodegenError(f"cannot parse return '{part.strip()}' of '{returns}' "
                                   "(expected 'Tensor name' or 'Tensor')")
            out.append(Return(rm.group(2), t))
        names = [r.name for r in out]
        if len(out) < 2:
            raise CodegenError(f"a tuple return has two or more results, got '{returns}'")
        if any(names) and (not all(names) or len(set(names)) != len(names)):
            raise CodegenError(f"a tuple return names all its results, each differently, or none, got '{returns}'")
        return tuple(out)
    try:
        t, annotation = types.parse_annotated(returns)
    except ValueError:
        t, annotation = None, None
    if t is None or t.optional or not (t.is_tensor() or (t.is_tensor_list() and annotation is None)
                                       or t.is_plain_value()):
        raise CodegenError(f"unknown return type '{returns}' (expected {_RETURN_FORMS})")
    return (Return(None, t, annotation),)


@dataclass(frozen=True)
class Schema:
    name: str                 # base name: add
    overload: str             # overload name: Tensor ('' if none)
    params: tuple[Param, ...]
    returns: tuple[Return, ...]  # one Return, two or more (a tuple return), or none (`-> ()`)

    @property
    def mutating(self) -> bool:
        """An in-place op declared as such (copy_, fill_): it writes its first argument."""
        return len(self.returns) == 1 and self.returns[0].is_write

    @property
    def returns_nothing(self) -> bool:
        """`-> ()`: an op that only writes its Tensor(a!)[] arguments; void in C++, None in Python."""
        return not self.returns

    @property
    def returns_view(self) -> bool:
        """The result aliases an input (`Tensor(a)`: views, contiguous, detach)."""
        return len(self.returns) == 1 and self.returns[0].is_view

    @property
    def returns_tuple(self) -> bool:
        """Several named results: a C++ std::tuple, a named tuple in Python."""
        return len(self.returns) > 1

    @property
    def returns_list(self) -> bool:
        """A list of tensors: a C++ std::vector<Tensor>, a tuple in Python."""
        return len(self.returns) == 1 and self.returns[0].type.is_tensor_list()

    @property
    def returns_value(self) -> bool:
        """A bool or an int (is_nonzero, numel): a C++ bool or std::int64_t, a Python bool or int."""
        return len(self.returns) == 1 and self.returns[0].type.is_plain_value()

    @property
    def returns_tensor(self) -> bool:
        """One new Tensor (no annotation): what a pointwise op returns."""
        return len(self.returns) == 1 and self.returns[0].type.is_tensor() and self.returns[0].annotation is None

    @property
    def return_names(self) -> tuple[str, ...]:
        """The names of a tuple return: ('values', 'indices'); () otherwise, and for an unnamed
        tuple return ('(Tensor, Tensor)')."""
        return tuple(r.name for r in self.returns if r.name) if self.returns_tuple else ()

    @property
    def returns_named_tuple(self) -> bool:
        """Several named results: a named tuple in Python (kael.return_types.<name>)."""
        return bool(self.return_names)

    @property
    def returns_text(self) -> str:
        if self.returns_tuple or self.returns_nothing:
            return "(" + ", ".join(str(r) for r in self.returns) + ")"
        return str(self.returns[0])

    @property
    def full_name(self) -> str:
        return f"{self.name}.{self.overload}" if self.overload else self.name

    @property
    def tensor_params(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.type.is_tensor())

    @property
    def scalar_params(self) -> tuple[Param, ...]:
        """The parameters that are not tensors (a pointwise op's Scalars)."""
        return tuple(p for p in self.params if not p.type.is_tensor())

    @staticmethod
    def parse(func: str) -> "Schema":
        m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?\((.*?)\)\s*->\s*(\S+|\(.*\))\s*",
                         func)
        if not m:
            raise CodegenError(f"cannot parse func '{func}': expected 'name[.overload](args) -> Return'")
        name, overload, args = m.group(1), m.group(2) or "", m.group(3)
        returns = _parse_returns(m.group(4))
        mutating = len(returns) == 1 and returns[0].is_write
        if name.endswith("_") and not mutating and returns:
            raise CodegenError(f"'{name}': in-place variants are derived, declare the functional op "
                               "(an op that exists only in place returns Tensor(a!))")
        if mutating and not name.endswith("_"):
            raise CodegenError(f"'{name}' returns Tensor(a!), so it writes in place: its name ends in '_'")
        params = _parse_params(args)
        if not returns and not (name.endswith("_") and any(p.is_write for p in params)):
            raise CodegenError(f"'{name}' returns nothing, so it writes a Tensor(a!)[] argument and its name "
                               "ends in '_'")
        if mutating and not (params and params[0].is_write and params[0].type.is_tensor()):
            raise CodegenError("an op returning Tensor(a!) takes 'Tensor(a!) self' first")
        if len(params) > types.MAX_PARAMS - 1:  # one slot stays free for out=
            raise CodegenError(f"{len(params)} arguments; the generated parsers take at most "
                               f"{types.MAX_PARAMS - 1}")
        names = {p.name for p in params}
        for r in returns:
            if r.name in names:
                raise CodegenError(f"result name '{r.name}' is also an argument name")
        return Schema(name, overload, tuple(params), returns)

    def signature_text(self, *, skip_self: bool = False, python: bool = True) -> str:
        """The signature as users see it: add(Tensor input, Tensor other, *, Scalar alpha=1)."""
        parts: list[str] = []
        star = False
        for p in self.params:
            if skip_self and p.name == "self":
                continue
            if p.kwonly and not star:
                parts.append("*")
                star = True
            name = "input" if (python and p.name == "self") else p.name
            text = f"{p.type_text} {name}"
            if p.has_default:
                text += f"={p.default}"
            parts.append(text)
        return f"{self.name}({', '.join(parts)})"


# ---------------------------------------------------------------------------- entries

PROMOTIONS = ("default", "int_to_float", "always_bool")
VARIANTS = ("function", "method")
SIMD_FORMULA = re.compile(r"\s*[A-Za-z_]\w*\(a\)\s*")
GIL_MODES = ("release", "auto", "hold")


@dataclass(frozen=True)
class NativeFunction:
    schema: Schema
    line: int
    variants: tuple[str, ...]
    pointwise: str | None
    promotion: str
    dtypes: tuple[str, ...]
    inplace: bool
    dispatch: tuple[tuple[str, str], ...]   # (concrete key, kernel), aliases expanded
    gil: str
    derivatives: tuple[tuple[str, str], ...]
    doc: str
    check: str | None = None  # hand-written argument check run before a pointwise kernel
    # the arguments PyTorch's kernel reads in the compute type: Scalar parameters, or the second of
    # two tensor inputs when it is a number or a one-element tensor (see codegen/README.md)
    opmath: tuple[str, ...] = ()
    # the result's layout: "inputs" (follows the tensor inputs) or "number_self_contiguous"
    layout: str = "inputs"
    # the formula is one call f(a) of a function with a SIMD form (see codegen/README.md)
    simd: bool = False
    # the dtype out= may have: "castable" (any the result casts to) or "result" (exactly the result's)
    out_dtype: str = "castable"
    # a non-pointwise function that takes out=: its result computed, then written into out of
    # the result's dtype ("exact") or of any dtype it casts to ("castable"); None: no out=
    out: str | None = None
    key_lines: tuple[tuple[str, int], ...] = ()  # registry line of each key ('derivatives.self' too)
    # a hand-written kernel that reads its tensors' values (false: it moves or aliases their memory
    # only, and may return an argument itself: to); see codegen/README.md
    reads_values: bool = True
    # the last positional Tensor[] may also be given as separate tensors (torch.meshgrid(*tensors))
    varargs: bool = False
    # calls the registry tests run in kael and in torch (see Sample and codegen/README.md)
    samples: tuple["Sample", ...] = ()

    def line_of(self, key: str) -> int:
        """The registry line of a key of this entry (the entry's line when unknown)."""
        return dict(self.key_lines).get(key, self.line)

    @property
    def name(self) -> str:
        return self.schema.name

    @property
    def ident(self) -> str:
        """C identifier unique per overload: add_Tensor."""
        return self.schema.full_name.replace(".", "_")

    @property
    def composite_implicit(self) -> bool:
        return self.kernel_for("Autograd") is not None and self.kernel_for("CPU") == self.kernel_for("Autograd")

    @property
    def is_pointwise(self) -> bool:
        return self.pointwise is not None

    @property
    def conditions(self) -> tuple[Param, ...]:
        """The tensor inputs declared before `self` (where's condition): read through truth(), they
        take no part in type promotion (see codegen/README.md, "Argument order")."""
        out = []
        for p in self.schema.params:
            if p.name == "self":
                return tuple(out)
            if p.type.is_tensor():
                out.append(p)
        return ()

    @property
    def condition_first(self) -> bool:
        return bool(self.conditions)

    @property
    def opmath_other_scalar(self) -> bool:
        """The second tensor input, when a number or one-element tensor, is read in the compute type."""
        tensors = self.schema.tensor_params
        return len(tensors) == 2 and tensors[1].name in self.opmath

    def scalar_in_opmath(self, p: Param) -> bool:
        """A Scalar parameter read in the compute type (not checked against the storage type)."""
        return p.name in self.opmath

    @property
    def number_self_contiguous(self) -> bool:
        return self.layout == "number_self_contiguous"

    @property
    def exact_out(self) -> bool:
        """out= must have the result's dtype, which promotion gives (a non-always_bool op with
        out_dtype 'result'): checked once the call has promoted its inputs, before any write."""
        return self.out_dtype == "result" and self.promotion != "always_bool"

    @property
    def bool_out(self) -> bool:
        """out= must be a bool tensor (an always_bool op whose out= must have the result's dtype)."""
        return self.out_dtype == "result" and self.promotion == "always_bool"

    @property
    def operand_inputs(self) -> bool:
        """Pointwise ops of two or more inputs take numbers for tensors (see codegen/README.md)."""
        return self.is_pointwise and len(self.schema.tensor_params) >= 2

    def kernel_for(self, key: str) -> str | None:
        for k, kernel in self.dispatch:
            if k == key:
                return kernel
        return None


def _pop(entry: dict[str, Any], key: str, default: Any = None) -> Any:
    return entry.pop(key) if key in entry else default


def _str_list(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CodegenError(f"'{what}' must be a list of names")
    return tuple(value)


LAYOUTS = ("inputs", "number_self_contiguous")
OUT_DTYPES = ("castable", "result")


def _check_pointwise_properties(schema: Schema, pointwise: str | None, promotion: str, opmath: Any,
                                layout: Any, out_dtype: Any) -> tuple[str, ...]:
    """Validates the general properties of a pointwise kernel (see codegen/README.md): the
    arguments read in the compute type, the result's layout, out='s dtype rule and the argument
    order (a condition before self)."""
    opmath = _str_list(opmath, "opmath")
    tensors = schema.tensor_params
    for name in opmath:
        p = next((q for q in schema.params if q.name == name), None)
        second = len(tensors) == 2 and p is tensors[1]
        if pointwise is None or p is None or not (p.type.is_scalar() or second):
            raise CodegenError(f"'opmath' names Scalar parameters or the second of two tensor inputs of a "
                               f"pointwise op, not '{name}'")
    if len(set(opmath)) != len(opmath):
        raise CodegenError("'opmath' names each argument once")
    if layout not in LAYOUTS:
        raise CodegenError(f"unknown layout '{layout}' (expected one of {', '.join(LAYOUTS)})")
    if layout != "inputs" and (pointwise is None or len(tensors) != 2):
        raise CodegenError(f"layout '{layout}' applies to pointwise ops of two tensor inputs only")
    if out_dtype not in OUT_DTYPES:
        raise CodegenError(f"unknown out_dtype '{out_dtype}' (expected one of {', '.join(OUT_DTYPES)})")
    if out_dtype != "castable" and pointwise is None:
        raise CodegenError("out_dtype 'result' applies to pointwise ops only")
    if pointwise is not None:
        before_self = [p for p in schema.params[:[q.name for q in schema.params].index("self")] if p.type.is_tensor()]
        if len(before_self) > 1 or (before_self and before_self[0] is not tensors[0]):
            raise CodegenError("a pointwise op takes at most one tensor input before 'self', first (a condition)")
    return opmath


OUT_KINDS = ("exact", "castable")


def _check_out(schema: Schema, variants: tuple[str, ...], pointwise: Any, out: Any) -> str | None:
    """`out: exact|castable`: a function returning one new tensor also takes out= (every pointwise
    op does), of the result's dtype or of any dtype the result casts to."""
    if out is None:
        return None
    if out not in OUT_KINDS:
        raise CodegenError(f"unknown out '{out}' (expected one of {', '.join(OUT_KINDS)})")
    if pointwise is not None:
        raise CodegenError("'out' is for non-pointwise ops: every pointwise op takes out=")
    if "function" not in variants:
        raise CodegenError("'out' needs the function variant (methods take no out=)")
    if schema.mutating or len(schema.returns) != 1 or not schema.returns[0].type.is_tensor() \
            or schema.returns[0].type.optional or schema.returns_list:
        raise CodegenError("'out' needs an op that returns one new Tensor")
    if any(p.name == "out" for p in schema.params):
        raise CodegenError("'out' needs an op without a parameter named out")
    if len(schema.params) > types.MAX_PARAMS - 1:
        raise CodegenError(f"'out' needs a free slot: at most {types.MAX_PARAMS - 1} parameters")
    return out


def _check_pointwise_entry(schema: Schema, pointwise: Any, dispatch_raw: Any, inplace: Any, promotion: str,
                           gil: str | None) -> tuple[bool, str]:
    """Checks a `pointwise:` entry; returns whether it has an in-place form and its GIL mode."""
    if not isinstance(pointwise, str) or not pointwise.strip():
        raise CodegenError("'pointwise' must be a C++ expression")
    if dispatch_raw is not None:
        raise CodegenError("an entry has either 'pointwise' or 'dispatch', not both")
    if not schema.returns_tensor:
        raise CodegenError("pointwise ops return a new Tensor (their in-place variant is derived)")
    n = len(schema.tensor_params)
    if not 1 <= n <= 3:
        raise CodegenError(f"pointwise ops take one to three Tensor inputs, got {n}")
    for p in schema.params:
        if not (p.type.is_tensor() or p.type.is_scalar()) or p.type.optional:
            raise CodegenError(f"pointwise argument '{p.name}' must be Tensor or Scalar, got '{p.type}'")
    if not any(p.name == "self" and p.type.is_tensor() for p in schema.params):
        raise CodegenError("a pointwise op takes a 'Tensor self' argument")
    if inplace is None:
        inplace = promotion != "always_bool" and schema.params[0].name == "self"
    if inplace and schema.params[0].name != "self":
        raise CodegenError("an in-place variant writes its first argument, which must be 'Tensor self'")
    if gil is None:
        gil = "auto"
    return inplace, gil


def _parse_dispatch(dispatch_raw: Any, derivatives_raw: Any, inplace: Any, promotion: str,
                    gil: str | None) -> tuple[list[tuple[str, str]], bool, str]:
    """A hand-written entry's `dispatch:` (aliases expanded to their keys), in-place flag (none)
    and GIL mode."""
    dispatch: list[tuple[str, str]] = []
    if not isinstance(dispatch_raw, dict) or not dispatch_raw:
        raise CodegenError("missing 'dispatch' (or 'pointwise')")
    for key, kernel in dispatch_raw.items():
        if not isinstance(kernel, str) or not _IDENT.match(kernel):
            raise CodegenError(f"dispatch kernel for '{key}' must be a C++ function name")
        keys = enums.ALIAS_KEYS.get(key, (key,) if key in enums.BACKEND_KEYS else None)
        if keys is None:
            known = ", ".join(enums.BACKEND_KEYS + tuple(enums.ALIAS_KEYS))
            raise CodegenError(f"unknown dispatch key '{key}' (expected one of {known})")
        for k in keys:
            if any(k == existing for existing, _ in dispatch):
                raise CodegenError(f"dispatch key '{k}' given twice")
            dispatch.append((k, kernel))
    if "CompositeImplicit" in dispatch_raw and len(dispatch_raw) > 1:
        raise CodegenError("a CompositeImplicit kernel serves every key; give no other")
    if "CompositeImplicit" in dispatch_raw and derivatives_raw:
        raise CodegenError("a CompositeImplicit op is differentiated through the ops it calls; "
                           "give 'derivatives' only with CompositeExplicit or backend kernels")
    if inplace:
        raise CodegenError("'inplace' is derived for pointwise ops only")
    if "promotion" in (dispatch_raw or {}) or promotion != "default":
        raise CodegenError("'promotion' applies to pointwise ops only")
    inplace = False
    if gil is None:
        gil = "hold"
    return dispatch, inplace, gil


def _parse_derivatives(schema: Schema, derivatives_raw: Any, pointwise: Any) -> list[tuple[str, str]]:
    """`derivatives:`, input name -> C++ formula, in order."""
    if schema.returns_value and derivatives_raw:
        raise CodegenError(f"an op returning {schema.returns[0].type} has no derivatives")
    if schema.returns_nothing and (derivatives_raw or pointwise is not None):
        raise CodegenError("an op returning () has no derivatives and no pointwise formula")
    if not isinstance(derivatives_raw, dict):
        raise CodegenError("'derivatives' must map input names to formulas")
    names = {p.name for p in schema.params}
    derivatives = []
    for k, v in derivatives_raw.items():
        if k not in names:
            raise CodegenError(f"derivative for unknown input '{k}'")
        if not isinstance(v, str):
            raise CodegenError(f"derivative for '{k}' must be a C++ expression")
        derivatives.append((k, v))
    return derivatives


@dataclass(frozen=True)
class Sample:
    """One call of the op that the registry tests run in kael and in torch (an OpInfo sample):
    `call` is a Python expression over L (the library: kael or torch), F (L.nn.functional) and
    the input makers f(*shape, domain=) (a floating tensor that requires grad; domain any, pos,
    unit, prob or nonzero), idx(*shape, high=) (int64 indices in [0, high)), perm_idx(*shape)
    (rows that are permutations) and mask(*shape) (bool). noncontig: also run with inputs that
    are permuted views; atol/rtol: the comparison's tolerances where the default does not hold."""
    call: str
    noncontig: bool = True
    atol: float | None = None
    rtol: float | None = None


SAMPLE_NAMES = frozenset({"L", "F", "f", "idx", "perm_idx", "mask", "None", "True", "False"})
SAMPLE_MAKERS = ("f", "idx", "perm_idx", "mask")


def _parse_samples(raw: Any) -> tuple[Sample, ...]:
    if not isinstance(raw, list):
        raise CodegenError("'samples' must be a list of calls")
    samples = []
    for item in raw:
        if isinstance(item, str):
            item = {"call": item}
        if isinstance(item, dict):  # the loader's line markers aside
            item = {k: v for k, v in item.items() if not k.startswith("__")}
        if not isinstance(item, dict) or not isinstance(item.get("call"), str):
            raise CodegenError("a sample is a call (a string) or a mapping with 'call'")
        unknown = set(item) - {"call", "noncontig", "atol", "rtol"}
        if unknown:
            raise CodegenError(f"sample: unknown key(s) {', '.join(sorted(unknown))}")
        call = item["call"]
        try:
            tree = ast.parse(call, mode="eval")
        except SyntaxError as e:
            raise CodegenError(f"sample '{call}' is not a Python expression: {e.msg}") from None
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        if names - SAMPLE_NAMES:
            raise CodegenError(f"sample '{call}' uses {', '.join(sorted(names - SAMPLE_NAMES))}; a sample may use "
                               f"{', '.join(sorted(SAMPLE_NAMES))}")
        noncontig = item.get("noncontig", True)
        if not isinstance(noncontig, bool):
            raise CodegenError("sample: 'noncontig' must be true or false")
        tolerances = [item.get(k) for k in ("atol", "rtol")]
        if any(t is not None and (not isinstance(t, (int, float)) or isinstance(t, bool) or t < 0) for t in tolerances):
            raise CodegenError("sample: 'atol' and 'rtol' must be non-negative numbers")
        samples.append(Sample(call, noncontig, *(None if t is None else float(t) for t in tolerances)))
    return tuple(samples)


def parse_entry(entry: dict[str, Any], line: int, key_lines: dict[str, int] | None = None) -> NativeFunction:
    entry = dict(entry)
    entry_keys = set(entry)
    func = _pop(entry, "func")
    if not isinstance(func, str):
        raise CodegenError("missing 'func'")
    schema = Schema.parse(func)
    variants = _str_list(_pop(entry, "variants", ["function"]), "variants")
    for v in variants:
        if v not in VARIANTS:
            raise CodegenError(f"unknown variant '{v}' (expected one of {', '.join(VARIANTS)})")
    if "method" in variants and not _takes_self(schema):
        raise CodegenError("a method variant needs a positional 'Tensor self' argument")

    pointwise = _pop(entry, "pointwise")
    promotion = _pop(entry, "promotion", "default")
    dtypes = _str_list(_pop(entry, "dtypes", list(enums.DTYPE_NAMES)), "dtypes")
    inplace = _pop(entry, "inplace", None)
    dispatch_raw = _pop(entry, "dispatch")
    gil = _pop(entry, "gil", None)
    derivatives_raw = _pop(entry, "derivatives", {})
    doc = _pop(entry, "doc")
    check = _pop(entry, "check")
    opmath = _pop(entry, "opmath", [])
    layout = _pop(entry, "layout", "inputs")
    simd = _pop(entry, "simd", False)
    out_dtype = _pop(entry, "out_dtype", "castable")
    out = _check_out(schema, variants, pointwise, _pop(entry, "out"))
    reads_values = _pop(entry, "reads_values", True)
    varargs = _pop(entry, "varargs", False)
    samples = _parse_samples(_pop(entry, "samples", []))
    if entry:
        raise CodegenError(f"unknown key(s): {', '.join(sorted(entry))}")

    if not isinstance(doc, str) or not doc.strip():
        raise CodegenError("missing 'doc' (one sentence users read in help())")
    if promotion not in PROMOTIONS:
        raise CodegenError(f"unknown promotion '{promotion}' (expected one of {', '.join(PROMOTIONS)})")
    if not dtypes or len(set(dtypes)) != len(dtypes):
        raise CodegenError("'dtypes' must list each supported dtype once")
    if "dtypes" in entry_keys and pointwise is None:
        raise CodegenError("'dtypes' applies to pointwise ops only")
    if inplace is not None and not isinstance(inplace, bool):
        raise CodegenError("'inplace' must be true or false")
    for d in dtypes:
        if d not in enums.DTYPE_NAMES:
            raise CodegenError(f"unknown dtype '{d}' (expected one of {', '.join(enums.DTYPE_NAMES)})")
    if gil is not None and gil not in GIL_MODES:
        raise CodegenError(f"unknown gil mode '{gil}' (expected one of {', '.join(GIL_MODES)})")

    if pointwise is not None:
        dispatch: list[tuple[str, str]] = []
        inplace, gil = _check_pointwise_entry(schema, pointwise, dispatch_raw, inplace, promotion, gil)
    else:
        dispatch, inplace, gil = _parse_dispatch(dispatch_raw, derivatives_raw, inplace, promotion, gil)

    if check is not None:
        if pointwise is None:
            raise CodegenError("'check' applies to pointwise ops only (hand-written kernels check their inputs)")
        if not isinstance(check, str) or not _IDENT.match(check):
            raise CodegenError("'check' must be a C++ function name")

    opmath = _check_pointwise_properties(schema, pointwise, promotion, opmath, layout, out_dtype)
    if not isinstance(simd, bool):
        raise CodegenError("'simd' must be true or false")
    if simd and (pointwise is None or len(schema.params) != 1 or not SIMD_FORMULA.fullmatch(pointwise)):
        raise CodegenError("'simd' applies to pointwise ops of one input whose formula is one call f(a)")

    if not isinstance(reads_values, bool):
        raise CodegenError("'reads_values' must be true or false")
    if not reads_values and pointwise is not None:
        raise CodegenError("'reads_values' applies to hand-written ops only")
    if not isinstance(varargs, bool):
        raise CodegenError("'varargs' must be true or false")
    positional = [p for p in schema.params if not p.kwonly]
    if varargs and not (positional and positional[-1].type.is_tensor_list()):
        raise CodegenError("'varargs' needs a Tensor[] as the last positional argument")

    derivatives = _parse_derivatives(schema, derivatives_raw, pointwise)

    return NativeFunction(
        schema=schema, line=line, variants=variants, pointwise=pointwise, promotion=promotion,
        dtypes=dtypes, inplace=bool(inplace), dispatch=tuple(dispatch), gil=gil,
        derivatives=tuple(derivatives), doc=" ".join(doc.split()), check=check,
        opmath=opmath, layout=layout, simd=simd, out_dtype=out_dtype, out=out, reads_values=reads_values, varargs=varargs,
        samples=samples, key_lines=tuple(sorted((key_lines or {}).items())),
    )


class _LineLoader(yaml.SafeLoader):
    """Records the line of each mapping as '__line__'."""


# libyaml's parser when PyYAML has it: the registry parses about ten times faster, and codegen
# runs on every registry edit (docs/performance.md, "Figures behind kernel constants"). A
# registry it rejects is parsed again by the pure-Python parser, whose error messages are the
# ones kael reports.
_FastSafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _FastLineLoader(_FastSafeLoader):
    """_LineLoader on libyaml's parser."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> dict[str, Any]:
    keys = [k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)]
    for k in keys:
        if keys.count(k) > 1:
            raise CodegenError(f"{node.start_mark.line + 1}: key '{k}' given twice")
    mapping = loader.construct_mapping(node, deep=True)
    mapping["__line__"] = node.start_mark.line + 1
    mapping["__key_lines__"] = {k.value: k.start_mark.line + 1 for k, _ in node.value if isinstance(k, yaml.ScalarNode)}
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_FastLineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _load(text: str) -> tuple[Any, Any]:
    """(the node tree, the data with lines) of a registry's text."""
    try:
        return yaml.compose(text, Loader=_FastSafeLoader), yaml.load(text, Loader=_FastLineLoader)
    except yaml.YAMLError:
        return yaml.compose(text, Loader=yaml.SafeLoader), yaml.load(text, Loader=_LineLoader)


def _strip_lines(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_lines(v) for k, v in value.items() if k not in ("__line__", "__key_lines__")}
    return value


def parse_registry(text: str, path: str = "native_functions.yaml") -> list[NativeFunction]:
    """Parses and validates the whole registry."""
    try:
        root, data = _load(text)
    except CodegenError as e:  # a repeated key: the message starts with its line
        raise CodegenError(f"{path}:{e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else path
        raise CodegenError(f"{where}: invalid YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(data, list):
        raise CodegenError(f"{path}:1: the registry must be a list of entries")
    functions: list[NativeFunction] = []
    seen: dict[str, int] = {}
    lines = [n.start_mark.line + 1 for n in root.value] if isinstance(root, yaml.SequenceNode) else []
    for index, raw in enumerate(data):
        if not isinstance(raw, dict):
            where = f"{path}:{lines[index]}" if index < len(lines) else path
            raise CodegenError(f"{where}: every entry must be a mapping")
        line = raw.get("__line__", 0)
        key_lines = dict(raw.get("__key_lines__", {}))
        derivative_map = raw.get("derivatives")
        if isinstance(derivative_map, dict):
            key_lines.update({f"derivatives.{k}": v for k, v in derivative_map.get("__key_lines__", {}).items()})
        label = raw.get("func", "<entry>")
        label = label.split("(")[0] if isinstance(label, str) else "<entry>"
        try:
            f = parse_entry(_strip_lines(raw), line, key_lines)
        except CodegenError as e:
            raise CodegenError(f"{path}:{line}: {label}: {e}") from None
        if f.schema.full_name in seen:
            raise CodegenError(f"{path}:{line}: {label}: duplicate name (first defined at line "
                               f"{seen[f.schema.full_name]})")
        seen[f.schema.full_name] = line
        functions.append(f)
    _check_overloads(functions, path)
    return functions


def with_variant(group: list[NativeFunction], method: bool) -> list[NativeFunction]:
    """The overloads of a name that have the function (or method) spelling: an overload may be a
    function only (repeat_interleave.Tensor, whose first argument is not self), as in PyTorch."""
    return [f for f in group if ("method" if method else "function") in f.variants]


def _takes_self(schema: Schema) -> bool:
    """Whether the op has a positional 'Tensor self', which a method binds."""
    self_params = [p for p in schema.params if p.name == "self"]
    return bool(self_params) and self_params[0].type.is_tensor() and not self_params[0].type.optional \
        and not self_params[0].kwonly


def _check_overloads(functions: list[NativeFunction], path: str) -> None:
    by_name: dict[str, list[NativeFunction]] = {}
    for f in functions:
        by_name.setdefault(f.name, []).append(f)
    for name, group in by_name.items():
        # The overloads of a name declare the same variants, except that one without a positional
        # 'Tensor self' leaves out 'method' (repeat_interleave.Tensor(Tensor repeats), as PyTorch's).
        union = {v for f in group for v in f.variants}
        for f in group:
            missing = union - set(f.variants)
            if missing and (missing != {"method"} or _takes_self(f.schema)):
                raise CodegenError(f"{path}:{f.line}: {f.schema.full_name}: overloads of '{name}' "
                                   "must declare the same variants (one without a positional 'Tensor self' "
                                   "may leave out 'method')")
        pointwise = [f for f in group if f.is_pointwise]
        if len(pointwise) > 1 or (pointwise and pointwise[0].schema.full_name != name):
            f = group[-1]
            raise CodegenError(f"{path}:{f.line}: {f.schema.full_name}: pointwise op '{name}' "
                               "cannot have overloads")
        # A pointwise op may have hand-written overloads that a keyword-only parameter of their
        # own tells apart (div and div(..., rounding_mode=)), or fewer positional arguments than
        # the pointwise op requires (where(condition) beside where(condition, self, other)):
        # every other call reaches the pointwise op.
        for f in group:
            if pointwise and not f.is_pointwise and not any(p.kwonly for p in f.schema.params):
                required = sum(1 for p in pointwise[0].schema.params if not p.kwonly and not p.has_default)
                if sum(1 for p in f.schema.params if not p.kwonly) >= required:
                    raise CodegenError(f"{path}:{f.line}: {f.schema.full_name}: an overload of pointwise op "
                                       f"'{name}' needs a keyword-only parameter of its own, or fewer positional "
                                       "arguments")
