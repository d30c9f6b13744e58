"""Entry point: ``python -m codegen.gen --yaml native_functions.yaml --out <build>/generated``.

Renders every template into the output directory (never into the source tree) through one
writer that stamps each file, rewrites a file only when its content changed (so the build
recompiles only what an edit touched), removes files it no longer produces, and writes
``sources.cmake`` listing the outputs for CMake.
"""
from __future__ import annotations

import argparse
import re
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from codegen import enums, types
from codegen.cpp_types import (_TENSOR_PARAMS, arg_type, cpp_args, cpp_default, cpp_params,  # noqa: F401
                               cpp_return, cpp_type, overload_order, unbox_type)
from codegen.model import CodegenError, NativeFunction, Param, parse_registry, with_variant
from codegen.python_binding import (PyParam, has_out, has_requires_grad, none_is_empty_list,  # noqa: F401
                                    py_call, py_params, py_return, py_signature, pyi_return, pyi_signature,
                                    varargs_intlist, varargs_tensorlist)

TEMPLATES = Path(__file__).resolve().parent / "templates"
NUM_SHARDS = 24


class Writer:
    def __init__(self, out: Path):
        self.out = out
        self.written: list[Path] = []
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(TEMPLATES)),
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
            # Compiled templates kept beside the output: a registry edit re-runs codegen with
            # unchanged templates, which then load instead of compiling (docs/build.md).
            bytecode_cache=jinja2.FileSystemBytecodeCache(str(self._cache_dir(out))),
        )

    @staticmethod
    def _cache_dir(out: Path) -> Path:
        path = out / ".jinja-cache"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def render(self, template: str, relpath: str, **context) -> Path:
        text = self.env.get_template(template).render(**context)
        if relpath.endswith(".md"):  # the template carries its own HTML-comment stamp
            return self.write(relpath, text)
        comment = "#" if relpath.endswith((".pyi", ".cmake")) else "//"
        stamp = f"{comment} @generated from codegen/templates/{template} -- do not edit\n"
        return self.write(relpath, self.reset_lines(relpath, stamp + text))

    LINE_RESET = "// @@line-reset@@"

    def reset_lines(self, relpath: str, text: str) -> str:
        """Replaces each LINE_RESET marker, which follows code placed under a `#line` directive
        naming the registry, with a directive that restores this file's own line numbers."""
        if self.LINE_RESET not in text:
            return text
        lines = text.split("\n")
        for i, line in enumerate(lines):
            if line.strip() == self.LINE_RESET:
                lines[i] = f'#line {i + 2} "{(self.out / relpath).as_posix()}"'
        return "\n".join(lines)

    def write(self, relpath: str, text: str) -> Path:
        path = self.out / relpath
        self.written.append(path)
        if path.exists() and path.read_text() == text:
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def remove_stale(self) -> None:
        """Removes generated files (those with the stamp) that this run did not write."""
        keep = {p.resolve() for p in self.written}
        for path in self.out.rglob("*"):
            if not path.is_file() or path.resolve() in keep:
                continue
            try:
                with path.open("r", encoding="utf-8") as fh:
                    head = fh.readline()
            except (OSError, UnicodeDecodeError):
                continue
            if "@generated from codegen/templates/" in head:
                path.unlink()


# C++ types of parameters and results: codegen/cpp_types.py

@dataclass
class CppVariant:
    """One C++ entry point of an entry: the functional op, its in-place `op_`, its `op_out`."""
    op: str            # OpEntry suffix: add, add_inplace, add_out
    name: str          # C++ function: add, add_, add_out
    schema_name: str   # name in the dispatcher: add, add_, add.out
    ret: str           # Tensor, or const Tensor& for ops that return an argument
    returns_arg: str | None  # the argument returned (self of an in-place op, out), or None
    params: str        # with names, no defaults
    params_decl: str   # with defaults, for the header
    param_types: str   # without names
    args: str
    unbox: list[str]   # C++ type each boxed argument unboxes to, in order
    keys: str
    kernels: dict[str, str]  # dispatch key -> kernel in kael::native (only keys that have one)
    generated_cpu: bool  # the CPU kernel is generated from a pointwise formula
    autograd: str | None = None  # the generated Autograd kernel: functional, inplace, out (or none)
    # an `out:` entry's out variant: the generated kernel (every key) computes the op, then
    # writes out (native::write_out); it lists the checks of its inputs for requires_grad
    out_of: str | None = None
    out_exact: bool = True
    grad_inputs: str = ""
    grad_lists: str = ""
    # the tensor arguments a hand-written CPU kernel reads, each passed through native::BoolInput
    # (Note [Bool bytes] in kael/core/convert.h): (name, the BoolInput class for its type)
    bool_reads: tuple[tuple[str, str], ...] = ()

    def kernel_args(self, key: str) -> str:
        """The arguments of the call of `key`'s kernel: a read bool tensor canonical on the CPU."""
        if key != "CPU" or not self.bool_reads:
            return self.args
        names = {name for name, _ in self.bool_reads}
        return ", ".join(f"{a}_read.get()" if a in names else a for a in self.args.split(", "))

    @property
    def value_ret(self) -> str:
        """The result held by value (an op returning its argument by reference returns a Tensor)."""
        return types.TENSOR.arg_type.cpp_value if self.returns_arg else self.ret

    @property
    def var_ret(self) -> str:
        """The result type of the kael::Var method: Var for one tensor, the C++ type otherwise."""
        return "Var" if self.value_ret == types.TENSOR.arg_type.cpp_value else self.ret

    @property
    def num_args(self) -> int:
        return len(self.unbox)

    @property
    def boxed_args(self) -> str:
        return ", ".join(f"dispatch::unbox<{t}>(stack[base + {i}])" for i, t in enumerate(self.unbox))


def _kernels(f: NativeFunction, cuda: bool) -> dict[str, str]:
    out: dict[str, str] = {}
    for key in enums.DISPATCH_KEYS:
        kernel = f.kernel_for(key)
        if kernel and (key != "CUDA" or cuda):
            out[key] = kernel
    return out


def _out_variant(f: NativeFunction, unbox: list[str], **kernel_fields: Any) -> CppVariant:
    """The out variant `<op>_out(out, ...)`, dispatcher entry `<op>.out`, with the given kernels."""
    return CppVariant(
        op=f"{f.ident}_out", name=f"{f.name}_out", schema_name=f"{f.schema.full_name}.out", ret="const Tensor&",
        returns_arg="out",
        params="const Tensor& out, " + cpp_params(f, defaults=False),
        params_decl="const Tensor& out, " + cpp_params(f, defaults=True),
        param_types="const Tensor&, " + cpp_params(f, defaults=False, names=False),
        args="out, " + cpp_args(f), unbox=["Tensor"] + unbox, keys="dispatch::key_set_of(out) | " + key_expr(f),
        **kernel_fields)


_VARIANTS: dict[tuple[int, bool], tuple[NativeFunction, list[CppVariant]]] = {}


def cpp_variants(f: NativeFunction, cuda: bool = False) -> list[CppVariant]:
    """The C++ entry points of f (functional, in-place, out=); several templates ask for each
    op's, so they are made once per run (the entry is kept with them, so its id stays its own)."""
    key = (id(f), cuda)
    if key not in _VARIANTS:
        _VARIANTS[key] = (f, _make_cpp_variants(f, cuda))
    return _VARIANTS[key][1]


def _make_cpp_variants(f: NativeFunction, cuda: bool) -> list[CppVariant]:
    unbox = [unbox_type(f, p) for p in f.schema.params]
    mutating = f.schema.mutating
    base = CppVariant(
        op=f.ident, name=f.name, schema_name=f.schema.full_name,
        ret=cpp_return(f), returns_arg="self" if mutating else None,
        params=cpp_params(f, defaults=False), params_decl=cpp_params(f, defaults=True),
        param_types=cpp_params(f, defaults=False, names=False), args=cpp_args(f), unbox=unbox, keys=key_expr(f),
        kernels={"CPU": f"{f.name}_cpu_generated"} if f.is_pointwise else _kernels(f, cuda),
        generated_cpu=f.is_pointwise,
        autograd=("inplace" if mutating else "functional") if autograd_supported(f) else None,
        bool_reads=bool_reads(f))
    out = [base]
    if f.inplace:
        out.append(CppVariant(
            op=f"{f.ident}_inplace", name=f"{f.name}_", schema_name=f"{f.schema.full_name}_", ret="const Tensor&",
            returns_arg="self",
            params=cpp_params(f, defaults=False, inplace=True), params_decl=cpp_params(f, defaults=True, inplace=True),
            param_types=cpp_params(f, defaults=False, inplace=True, names=False), args=cpp_args(f),
            unbox=["Tensor"] + unbox[1:], keys=key_expr(f), kernels={"CPU": f"{f.name}__cpu_generated"},
            generated_cpu=True, autograd="inplace" if autograd_supported(f) else None))
    if f.is_pointwise:
        out.append(_out_variant(f, unbox, kernels={"CPU": f"{f.name}_out_cpu_generated"}, generated_cpu=True,
                                autograd="out" if autograd_supported(f) else None))
    if f.out:
        tensors = [p for p in f.schema.params if p.type.is_tensor()]
        lists = [p for p in f.schema.params if p.type.is_tensor_list()]
        kernel = f"{f.ident}_out_generated"
        out.append(_out_variant(
            f, unbox, kernels={k: kernel for k in enums.ALIAS_KEYS["CompositeImplicit"] if k != "CUDA" or cuda},
            generated_cpu=False, out_of=f.name, out_exact=f.out == "exact",
            grad_inputs=", ".join(f"{p.name} ? &*{p.name} : nullptr" if p.type.optional else f"&{p.name}"
                                  for p in tensors),
            grad_lists=", ".join(p.name for p in lists)))
    return out


def bool_reads(f: NativeFunction) -> tuple[tuple[str, str], ...]:
    """The tensors a hand-written CPU kernel reads and does not write, for native::BoolInput: none
    for a pointwise kernel (its loop reads bool as bytes itself), a composite (CompositeExplicit or
    Implicit: the same kernel at CUDA; the kernels it calls read), a view (whose result must
    alias the argument itself), or a kernel marked `reads_values: false`."""
    cpu = f.kernel_for("CPU")
    if f.is_pointwise or cpu is None or cpu == f.kernel_for("CUDA") or f.schema.returns_view or not f.reads_values:
        return ()
    return tuple((p.name, "BoolListInput" if p.type.is_tensor_list() else
                  "OptionalBoolInput" if p.type.optional else "BoolInput")
                 for p in f.schema.params if p.type.is_tensor_like() and not p.is_write)


def key_expr(f: NativeFunction) -> str:
    """C++ expression of the call's dispatch key set."""
    tensors = [p for p in f.schema.params if p.type.is_tensor_like()]
    devices = [p for p in f.schema.params if p.type.is_device()]
    tensor_keys = " | ".join(f"dispatch::key_set_of({p.name})" for p in tensors)
    if tensors and devices:
        # A device argument, when given, picks the backend (to(device), zeros_like(x, device=)).
        return f"dispatch::on_device({tensor_keys}, {devices[0].name})"
    if tensors and all(p.type.is_tensor_list() for p in tensors):
        # a call with only empty lists still runs somewhere: the CPU kernel
        return f"dispatch::or_cpu({tensor_keys})"
    if tensors:
        return tensor_keys
    if devices:
        return f"dispatch::key_set_of({devices[0].name})"
    return "DispatchKeySet(DispatchKey::CPU)"


# Python bindings' signatures and parameters: codegen/python_binding.py


def shard_of(name: str) -> int:
    return zlib.crc32(name.encode()) % NUM_SHARDS


# The ops kael::Var's operators and mT() call, whatever the formulas say.
_VAR_OPERATOR_OPS = frozenset({"add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge", "neg", "transpose"})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def formula_vocabulary(functions: list[NativeFunction]) -> list[str]:
    """The op names the derivative formulas can call (Note [Formula vocabulary]): every
    identifier of a formula that names an op, as a function or as a method (`x.name(...)`,
    `x.name_(...)` for the in-place form), plus the ops behind Var's operators. Over-counts
    harmlessly (an argument named like an op), never under-counts: a formula calling an op
    outside it would not compile."""
    tokens = set(_VAR_OPERATOR_OPS)
    for f in functions:
        for _, formula in f.derivatives:
            tokens.update(_IDENTIFIER.findall(formula))
    names = {f.name for f in functions}
    return sorted(n for n in names if n in tokens or f"{n}_" in tokens)


def method_params(f: NativeFunction, v: "CppVariant") -> str:
    """A Var method's parameters: the variant's, without self, with the header's defaults."""
    parts = [p.strip() for p in _split_top(v.params_decl)]
    names = [p.name for p in f.schema.params]
    if len(parts) != len(names):  # out= variants are not methods
        parts = parts[len(parts) - len(names):]
    return ", ".join(part for part, name in zip(parts, names) if name != "self")


def method_args(f: NativeFunction, v: "CppVariant") -> str:
    return ", ".join("*this" if a == "self" else a for a in v.args.split(", "))


def _split_top(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "<({"
        depth -= ch in ">)}"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return out


# A call in a pointwise formula: name( or name<S>( (a helper told the storage type, to round its
# intermediates to it as PyTorch's kernel of that op does).
_CALL = re.compile(r"(?<![\w:.])([A-Za-z_]\w*)\s*(<\s*S\s*>)?\s*\(")


MATH_HEADER = Path(__file__).resolve().parent.parent / "aten/include/kael/native/math.h"


def math_functions(header: Path = MATH_HEADER) -> frozenset[str]:
    """The functions kael's math namespace declares (aten/include/kael/native/math.h): its
    `using std::<fn>;` lines and the functions it defines."""
    text = header.read_text()
    names = set(re.findall(r"^\s*using\s+std::(\w+)\s*;", text, re.M))
    names |= set(re.findall(r"^\s*(?:KAEL_HOST_DEVICE\s+)?(?:inline|constexpr)\b[^;{(=]*?\b([A-Za-z_]\w*)\s*\(",
                            text, re.M))
    return frozenset(names)


def formula_calls(formula: str) -> list[str]:
    return [m.group(1) for m in _CALL.finditer(formula) if m.group(1) != "T"]


def check_formulas(functions: list[NativeFunction], path: str) -> None:
    """Every function a pointwise formula calls must be one of kael's math namespace. The check
    runs here, with the registry line, instead of as a compile error in a generated kernel (which
    carries no registry line numbers, so that inserting an entry rewrites no other kernel)."""
    known = math_functions()
    for f in functions:
        if not f.is_pointwise:
            continue
        for name in formula_calls(f.pointwise):
            if name not in known:
                raise CodegenError(f"{path}:{f.line_of('pointwise')}: {f.schema.full_name}: the formula calls "
                                   f"'{name}', which kael's math namespace does not define "
                                   f"(aten/include/kael/native/math.h)")


def qualified_formula(f: NativeFunction) -> str:
    """The pointwise formula with every function call qualified by kael's math namespace, so a
    name that only the C library defines cannot bind to its double version. `T(...)` (the compute
    type) is a conversion, not a call."""
    return _CALL.sub(lambda m: m.group(0) if m.group(1) == "T" else f"math::{m.group(1)}{'<S>' if m.group(2) else ''}(",
                     f.pointwise)


def formula_params(f: NativeFunction, var: bool = True) -> str:
    """Parameters of a derivative formula's function: grad, the op's arguments, and result.
    Tensors are Vars where the formula is written (var=True, in formulas_<k>.cpp) and Tensors in the
    declared interface the graph nodes call (var=False): a node's file then needs neither
    kael/var.h nor kael/ops.h, which change whenever an op is added (Note [Autograd shards])."""
    tensor = "Var" if var else "Tensor"
    parts = [f"const {tensor}& grad"]
    for p in f.schema.params:
        if p.type.is_tensor():
            parts.append(f"{f'const std::optional<{tensor}>&' if p.type.optional else f'const {tensor}&'} {p.name}")
        elif p.type.is_tensor_list():
            parts.append(f"TensorList {p.name}")
        else:
            parts.append(f"{cpp_type(f, p)} {p.name}")
    if f.schema.returns_tuple:
        parts.append("TensorList grads")  # the gradient of every result (grad is the first's)
        parts += [f"const {tensor}& {n}" for n in f.schema.return_names]
    elif f.schema.returns_list:
        parts.append("TensorList grads")  # the gradient of every result (grad is the first's)
        parts.append("const std::vector<Tensor>& result")
    else:
        parts.append(f"const {tensor}& result")
    return ", ".join(parts)


def formula_args(f: NativeFunction) -> str:
    """The names of formula_params(f), in order: the call that forwards them."""
    return ", ".join(["grad", *(p.name for p in f.schema.params), *formula_results(f)])


def formula_results(f: NativeFunction) -> list[str]:
    """The names under which a derivative formula sees the op's results."""
    if f.schema.returns_tuple:
        return ["grads", *f.schema.return_names]
    if f.schema.returns_list:
        return ["grads", "result"]
    return ["result"]


def tuple_returns(functions: list[NativeFunction]) -> list[NativeFunction]:
    """One entry per op name with a tuple return (the first overload that has one): its named
    tuple type in Python, kael.return_types.<name>, like torch.return_types."""
    out: dict[str, NativeFunction] = {}
    for f in functions:
        if f.schema.returns_tuple and f.name not in out:
            out[f.name] = f
    for f in functions:
        if f.schema.returns_tuple and f.schema.return_names != out[f.name].schema.return_names:
            raise CodegenError(f"{f.schema.full_name}: overloads of '{f.name}' with tuple returns must name "
                               f"the same results ({', '.join(out[f.name].schema.return_names) or 'none'})")
    # an unnamed tuple return ('(Tensor, Tensor)') is a plain tuple in Python: no type
    return [f for f in out.values() if f.schema.returns_named_tuple]


def c_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def dtype_mask(f: NativeFunction) -> str:
    bits = [f"(1u << static_cast<int>(ScalarType::{d.enum}))" for d in enums.DTYPES if d.name in f.dtypes]
    return " | ".join(bits) if bits else "0u"


# ---------------------------------------------------------------------------- autograd

_META_USE = re.compile(r"\s*\.\s*(sizes|dtype|size|dim|numel|device)\s*\(")


def _uses(formula: str, name: str) -> list[int]:
    """End offsets of the uses of `name` as an identifier in a formula (not `x.name`, `x::name`)."""
    return [m.end() for m in re.finditer(rf"(?<![\w.:>]){re.escape(name)}\b", formula)]


def _usage(formulas: list[str], name: str) -> str:
    """How the formulas use an argument: 'none', 'meta' (only its sizes/dtype) or 'full'."""
    ends = [(fm, e) for fm in formulas for e in _uses(fm, name)]
    if not ends:
        return "none"
    return "meta" if all(_META_USE.match(fm, e) for fm, e in ends) else "full"


def node_names(functions: list[NativeFunction]) -> dict[str, str]:
    """PyTorch's names of graph nodes: MulBackward0, SumBackward1 (the overload's index)."""
    out: dict[str, str] = {}
    count: dict[str, int] = {}
    for f in functions:
        if not f.derivatives:
            continue
        camel = "".join(part[:1].upper() + part[1:] for part in f.name.strip("_").split("_") if part)
        out[f.schema.full_name] = f"{camel}Backward{count.get(camel, 0)}"
        count[camel] = count.get(camel, 0) + 1
    return out


@dataclass
class SavedArg:
    name: str
    kind: str      # tensor, meta, opt_tensor, list, value, none (not saved: passed empty)
    param: Param
    storage: str   # C++ type of the member (values)
    # A saved tensor that only some inputs' formulas read: those inputs. The node saves it only
    # when one of them requires grad (as torch's nodes do), so `x * 2` with a constant 2 keeps no
    # reference to x and an in-place write to x afterwards is legal. Empty: saved whenever the
    # node is made (every formula reads it, or it is not a tensor).
    needed_by: tuple[str, ...] = ()


def autograd_args(f: NativeFunction) -> list[SavedArg]:
    formulas = [fm for _, fm in f.derivatives]
    out = []
    for p in f.schema.params:
        use = _usage(formulas, p.name)
        users = tuple(name for name, fm in f.derivatives if _usage([fm], p.name) != "none")
        needed_by = users if len(users) < len(f.derivatives) else ()
        if p.type.is_tensor():
            if use == "none":
                kind = "none"
            elif p.type.optional:
                kind = "opt_tensor"
            else:
                kind = "meta" if use == "meta" else "tensor"
            out.append(SavedArg(p.name, kind, p, "", needed_by if kind in ("tensor", "opt_tensor") else ()))
        elif p.type.is_tensor_list():
            kind = "list" if use != "none" else "none_list"
            out.append(SavedArg(p.name, kind, p, "", needed_by if kind == "list" else ()))
        else:
            t = arg_type(f, p)
            storage = f"std::optional<{t.cpp_value}>" if p.type.optional else t.cpp_value
            out.append(SavedArg(p.name, "value", p, storage))
    return out


def is_list_param(f: NativeFunction, name: str) -> bool:
    return any(p.name == name and p.type.is_tensor_list() for p in f.schema.params)


def uses_result(f: NativeFunction) -> bool:
    return any(_uses(fm, "result") for _, fm in f.derivatives)


def autograd_supported(f: NativeFunction) -> bool:
    """Ops whose Autograd kernel is generated: differentiable, one Tensor result or a tuple of them."""
    return bool(f.derivatives) and not f.schema.returns_list and not f.composite_implicit


def used_returns(f: NativeFunction) -> list[str]:
    """The results of an op with a tuple return that its formulas read (`indices`): saved by its node."""
    if not f.schema.returns_tuple:
        return []
    return [r for r in f.schema.return_names if any(_uses(fm, r) for _, fm in f.derivatives)]


def result_args(f: NativeFunction) -> str:
    """The trailing arguments of a formula call in a node: `result`, or `grads` and every named result."""
    if f.schema.returns_tuple:
        return ", ".join(["TensorList(grads)", *f.schema.return_names])
    return "result"


def check_return_names(functions: list[NativeFunction], path: str) -> None:
    """A differentiable op's result names are visible to its formulas next to its arguments: no clash."""
    for f in functions:
        if not (f.derivatives and f.schema.returns_tuple):
            continue
        if not f.schema.returns_named_tuple:
            raise CodegenError(f"{path}:{f.line_of('derivatives')}: {f.schema.full_name}: an op with derivatives "
                               "names its results, which its formulas see")
        taken = {p.name for p in f.schema.params} | {"grad", "grads", "result"}
        for r in f.schema.return_names:
            if r in taken:
                raise CodegenError(f"{path}:{f.line_of('derivatives')}: {f.schema.full_name}: result name '{r}' "
                                   f"clashes with an argument or a name derivative formulas use")


def diff_inputs(f: NativeFunction) -> list[Param]:
    """Tensor inputs in order (each gets edges); those without a formula must not require grad."""
    return [p for p in f.schema.params if p.type.is_tensor_like()]


# ---------------------------------------------------------------------------- main

def generate(yaml_path: Path, out: Path, *, cuda: bool = False) -> Writer:
    _VARIANTS.clear()  # one run's entries (a process may generate several registries)
    functions = parse_registry(yaml_path.read_text(), yaml_path.name)
    check_formulas(functions, yaml_path.name)
    check_return_names(functions, yaml_path.name)
    writer = Writer(out)
    by_name: dict[str, list[NativeFunction]] = {}
    for f in functions:
        by_name.setdefault(f.name, []).append(f)
    _TENSOR_PARAMS.clear()
    _TENSOR_PARAMS.update((f.name, p.name) for group in by_name.values() if len(group) > 1
                          for f in group for p in f.schema.params if p.type.is_tensor())
    for group in by_name.values():
        group.sort(key=overload_order)
    names = sorted(by_name)
    # A pointwise op's derived in-place method (Tensor.div_) also takes the overloads of the
    # hand-written in-place entries of the same name (div_.Tensor_mode): one Python method with
    # all of them, the derived ones tried first; those entries get no Python spelling of their own.
    inplace_extra = {n: by_name[n + "_"] for n in names
                     if any(f.inplace for f in by_name[n]) and n + "_" in by_name}
    python_skip = {n + "_" for n in inplace_extra}
    common = dict(
        enums=enums, types=types, unbox_type=unbox_type, dtypes=enums.DTYPES, dispatch_keys=enums.DISPATCH_KEYS, cpp_type=cpp_type,
        cpp_params=cpp_params, cpp_args=cpp_args, cpp_default=cpp_default, key_expr=key_expr,
        cpp_variants=cpp_variants, with_variant=with_variant, py_params=py_params, py_call=py_call, py_signature=py_signature, pyi_signature=pyi_signature, varargs_intlist=varargs_intlist,
        varargs_tensorlist=varargs_tensorlist,
        c_string=c_string, dtype_mask=dtype_mask, cuda=cuda, qualified_formula=qualified_formula,
        method_params=method_params, method_args=method_args, formula_params=formula_params,
        formula_args=formula_args,
        formula_results=formula_results, py_return=py_return, pyi_return=pyi_return, cpp_return=cpp_return,
        tuple_returns=tuple_returns(functions),
        registry_name=yaml_path.name,
        autograd_args=autograd_args, uses_result=uses_result, autograd_supported=autograd_supported,
        used_returns=used_returns, result_args=result_args,
        diff_inputs=diff_inputs, is_list_param=is_list_param, node_names=node_names(functions),
        inplace_extra=inplace_extra, python_skip=python_skip, none_is_empty_list=none_is_empty_list,
    )
    writer.render("enums.h.j2", "include/kael/enums.h", **common)
    writer.render("param_kind.h.j2", "include/kael/python/param_kind.h", **common)
    for name in names:
        writer.render("op_header.h.j2", f"include/kael/ops/{name}.h", group=by_name[name], **common)
    writer.render("ops.h.j2", "include/kael/ops.h", names=names, **common)
    # Note [Formula vocabulary]: kael::Var has the methods, and kael/var.h includes the headers, of
    # the ops the derivative formulas call, not of every op: so adding an op whose name no formula
    # uses leaves var.h, and every formulas shard that includes it, untouched.
    vocabulary = formula_vocabulary(functions)
    writer.render("var.h.j2", "include/kael/var.h", functions=[f for f in functions if f.name in vocabulary],
                  op_names=set(vocabulary), op_headers=vocabulary, **common)
    differentiable = [f for f in functions if f.derivatives]
    # Note [Autograd shards]: the formulas are declared and defined per shard
    # (kael/autograd/formulas_<k>.h and src/autograd/formulas_<k>.cpp, the ops of shard k), and a
    # shard's graph nodes include only its own declarations and the headers of its own ops, so
    # that adding an op or editing a formula recompiles one shard of each.
    for i in range(NUM_SHARDS):
        writer.render("formulas_shard.h.j2", f"include/kael/autograd/formulas_{i}.h", shard=i,
                      functions=[f for f in differentiable if shard_of(f.name) == i], **common)
    writer.render("formulas.h.j2", "include/kael/autograd/formulas.h", num_shards=NUM_SHARDS, **common)
    handwritten = [f for f in functions if not f.is_pointwise]
    checked = [f for f in functions if f.check]
    writer.render("native_declarations.h.j2", "include/kael/native/declarations.h",
                  functions=handwritten, checked=checked, **common)

    aten_sources: list[str] = []
    python_sources: list[str] = []
    shards: list[list[str]] = [[] for _ in range(NUM_SHARDS)]
    for name in names:
        shards[shard_of(name)].append(name)
    for i, shard in enumerate(shards):
        group = [f for n in shard for f in by_name[n]]
        aten_sources.append(str(writer.render("ops_shard.cpp.j2", f"src/ops_{i}.cpp", shard=i, names=shard,
                                              functions=group, **common)))
        python_sources.append(str(writer.render("python_shard.cpp.j2", f"python/functions_{i}.cpp", shard=i,
                                                names=shard, by_name=by_name, **common)))
    cuda_sources: list[str] = []
    for f in functions:
        if f.is_pointwise:
            aten_sources.append(str(writer.render("pointwise_kernel.cpp.j2", f"src/pointwise/{f.name}.cpp",
                                                  f=f, **common)))
            # Always generated; compiled only in CUDA builds (see Note [Pointwise backends]).
            cuda_sources.append(str(writer.render("pointwise_kernel.cu.j2", f"cuda/pointwise/{f.name}.cu",
                                                  f=f, **common)))
    aten_sources.append(str(writer.render("all_ops.cpp.j2", "src/all_ops.cpp", functions=functions, **common)))
    for i in range(NUM_SHARDS):
        aten_sources.append(str(writer.render("formulas.cpp.j2", f"src/autograd/formulas_{i}.cpp", shard=i,
                                              functions=[f for f in differentiable if shard_of(f.name) == i],
                                              **common)))
    for i, shard in enumerate(shards):
        group = [f for n in shard for f in by_name[n] if autograd_supported(f)]
        op_headers = sorted({f.name for f in group} | {"clone"})  # clone: an in-place op saves self's copy
        aten_sources.append(str(writer.render("autograd_functions.cpp.j2", f"src/autograd/functions_{i}.cpp",
                                              shard=i, functions=group, op_headers=op_headers, **common)))
    python_sources.append(str(writer.render("python_tables.cpp.j2", "python/tables.cpp", num_shards=NUM_SHARDS,
                                            **common)))
    python_sources.append(str(writer.render("return_types.cpp.j2", "python/return_types.cpp", **common)))
    writer.render("_C.pyi.j2", "kael/_C.pyi", names=names, by_name=by_name, **common)
    writer.render("ops.md.j2", "docs/ops.md", functions=functions, **common)
    writer.render("sources.cmake.j2", "sources.cmake", aten_sources=aten_sources,
                  python_sources=python_sources, cuda_sources=cuda_sources, **common)
    writer.remove_stale()
    return writer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--yaml", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cuda", action="store_true")
    args = parser.parse_args(argv)
    try:
        generate(args.yaml, args.out, cuda=args.cuda)
    except CodegenError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
