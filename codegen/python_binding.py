"""The Python side of the generated bindings: each entry's Python parameters (names, kinds,
defaults, keyword-only, out= and requires_grad=), its signature as errors and help() show it,
its stub for _C.pyi, which arguments may be spread (view(2, 3), meshgrid(a, b)), and the C++ type
a parser's call returns."""
from __future__ import annotations

import keyword
from dataclasses import dataclass

from codegen import types
from codegen.cpp_types import arg_type, cpp_return
from codegen.model import NativeFunction, Param


@dataclass
class PyParam:
    name: str          # Python keyword name
    cpp_name: str
    kind: str          # ParamKind enumerator
    optional: bool
    kwonly: bool
    default: str | None
    param: Param
    type: types.ArgType


def has_out(f: NativeFunction, method: bool) -> bool:
    """Python functions of pointwise ops and of `out:` entries take out= (the derived `op_out`)."""
    return (f.is_pointwise or f.out) and not method


def has_requires_grad(f: NativeFunction, method: bool) -> bool:
    """Python factories (functions with a device argument) take requires_grad=, as PyTorch's do."""
    return not method and not f.schema.returns_tuple and not f.schema.returns_list and \
        any(p.type.is_device() for p in f.schema.params)


def py_signature(f: NativeFunction, method: bool, pyname: str) -> str:
    """The signature users read in errors and docstrings, under the Python name."""
    text = pyname + f.schema.signature_text(skip_self=method)[len(f.name):]
    if has_out(f, method):
        star = "" if any(p.kwonly for p in f.schema.params) else "*, "
        text = text[:-1] + (", " if text[-2] != "(" else "") + star + "Tensor? out=None)"
    if has_requires_grad(f, method):
        star = "" if any(p.kwonly for p in f.schema.params) else "*, "
        text = text[:-1] + (", " if text[-2] != "(" else "") + star + "bool requires_grad=False)"
    return text


def py_params(f: NativeFunction, method: bool) -> list[PyParam]:
    out = []
    for p in f.schema.params:
        if method and p.name == "self":
            continue
        t = arg_type(f, p)
        out.append(PyParam("input" if p.name == "self" else p.name, p.name, t.parser_kind, p.type.optional,
                           p.kwonly, p.default, p, t))
    if has_out(f, method):
        param = Param("out", types.OptionalType(types.TENSOR), "None", kwonly=True)
        out.append(PyParam("out", "out", param.type.arg_type.parser_kind, True, True, "None", param,
                           param.type.arg_type))
    if has_requires_grad(f, method):
        param = Param("requires_grad", types.BOOL, "False", kwonly=True)
        out.append(PyParam("requires_grad", "requires_grad", param.type.arg_type.parser_kind, False, True, "False",
                           param, param.type.arg_type))
    return out


def py_call(f: NativeFunction, method: bool, inplace: bool = False) -> dict[str, object]:
    """C++ call arguments of a generated parser, and its GIL-release condition."""
    args: list[str] = []
    large: list[str] = []
    i = 0
    for p in f.schema.params:
        if method and p.name == "self":
            expr = "self_tensor"
        else:
            deref = p.type.is_tensor() and not p.type.optional and not f.operand_inputs
            expr = f"*a{i}" if deref else f"a{i}"
            i += 1
        args.append(expr)
        if p.type.is_tensor() and not p.type.optional:
            large.append(f"large({expr})")
    release = {"release": "true", "hold": "false"}[f.gil] if f.gil != "auto" else (" || ".join(large) or "false")
    name = f.name + ("_" if inplace else "")
    body = f"return kael::{name}({', '.join(args)});"
    if has_out(f, method) and not inplace:
        out = f"a{i}"
        body = f"if ({out}) return kael::{f.name}_out(*{out}, {', '.join(args)}); " + body
        i += 1
    if has_requires_grad(f, method):
        body = (f"Tensor r_ = kael::{name}({', '.join(args)}); "
                f"if (a{i}) kael::autograd::set_requires_grad(r_, true); return r_;")
    return {"args": args, "release": release, "body": body}


def none_is_empty_list(p: Param) -> bool:
    """Whether Python's None stands for this parameter's default: an int[] whose default is [], which
    PyTorch's binding spells None (torch.amax(t, None), t.roll(1, dims=None))."""
    return p.type.is_int_list() and not p.type.optional and p.has_empty_list_default


def pyi_signature(f: NativeFunction, method: bool) -> str:
    parts = ["self"] if method else []
    star = False
    for p in f.schema.params:
        if method and p.name == "self":
            continue
        if p.kwonly and not star:
            parts.append("*")
            star = True
        t = arg_type(f, p).stub
        if p.type.is_int_list() and not p.type.takes_one_int():
            t = "Sequence[int]"  # one int only where the list has a size (int[2])
        if p.type.optional or none_is_empty_list(p):
            t += " | None"
        name = "input" if p.name == "self" else p.name
        if keyword.iskeyword(name):
            name += "_"  # `from`: Python accepts it only as a keyword string (`**{"from": 0}`), as in torch's stubs
        text = f"{name}: {t}"
        if p.has_default:
            text += " = " + ("None" if p.default == "None" else "...")
        parts.append(text)
    if has_out(f, method):
        if not star:
            parts.append("*")
            star = True
        parts.append("out: Tensor | None = None")
    if has_requires_grad(f, method):
        if not star:
            parts.append("*")
        parts.append("requires_grad: bool = False")
    return ", ".join(parts)


def varargs_intlist(f: NativeFunction, method: bool) -> bool:
    positional = [p for p in py_params(f, method) if not p.kwonly]
    return len(positional) == 1 and positional[0].param.type.is_int_list()


def varargs_tensorlist(f: NativeFunction, method: bool) -> int:
    """For an entry marked `varargs`, the index of its last positional Python parameter, a Tensor[]
    whose tensors may be given one by one (meshgrid(a, b), einsum("i,i", a, b)); otherwise -1."""
    positional = [p for p in py_params(f, method) if not p.kwonly]
    return len(positional) - 1 if f.varargs else -1


def py_return(f: NativeFunction) -> str:
    """The C++ type a generated parser's call returns (the in-place ops' `const Tensor&` is copied;
    a bool or int travels in ValueResult, csrc/guard.h)."""
    if f.schema.returns_value:
        return f"ValueResult<{cpp_return(f)}>"
    return types.TENSOR.arg_type.cpp_value if f.schema.mutating else cpp_return(f)


def pyi_return(f: NativeFunction) -> str:
    if f.schema.returns_nothing:
        return "None"
    stubs = [r.type.unwrap().elem.arg_type.stub if r.type.is_tensor_list() else r.type.arg_type.stub
             for r in f.schema.returns]
    if f.schema.returns_list:
        return f"tuple[{stubs[0]}, ...]"  # a tuple in Python, as torch.split returns
    return stubs[0] if len(stubs) == 1 else "tuple[" + ", ".join(stubs) + "]"
