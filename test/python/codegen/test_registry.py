"""The promise of native_functions.yaml: one entry is enough to add an op.

For every pointwise entry of the real registry, the built library must have the Python
spellings the entry declares, a stub in kael/_C.pyi, a docstring with the entry's doc and
signature, and the same results as the torch op of that name. A new pointwise entry is
covered by these tests without writing any.
"""
import inspect
import re
import sys
from pathlib import Path

import pytest
import torch

import kael
from helpers import POINTWISE_BY_HAND, check, to_kael

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from codegen.model import parse_registry  # noqa: E402

REGISTRY = parse_registry((ROOT / "native_functions.yaml").read_text(), "native_functions.yaml")
POINTWISE = [f for f in REGISTRY if f.is_pointwise and f.name not in POINTWISE_BY_HAND]
IDS = [f.name for f in POINTWISE]

BY_NAME = {}
for _f in REGISTRY:
    BY_NAME.setdefault(_f.name, []).append(_f)


@pytest.fixture(scope="module")
def pyi():
    path = Path(kael._C.__file__).with_name("_C.pyi")
    assert path.is_file(), f"{path} is missing: the build copies it next to the extension"
    return path.read_text()


def test_registry_has_pointwise_ops():
    assert len(POINTWISE) >= 20, [f.name for f in POINTWISE]


# ---------------------------------------------------------------- spellings

@pytest.mark.parametrize("f", POINTWISE, ids=IDS)
def test_python_spellings(f):
    # private entries (_gelu_grad) and torch.nn.functional-only ops stay in kael._C
    module = kael._C if f.name.startswith("_") or f.name in kael._FUNCTIONAL_ONLY else kael
    assert callable(getattr(module, f.name, None)) == ("function" in f.variants), f"kael.{f.name}"
    assert callable(getattr(kael.Tensor, f.name, None)) == ("method" in f.variants), f"Tensor.{f.name}"
    has_inplace_method = f.inplace and "method" in f.variants  # Tensor.<name>_ is a method only
    assert callable(getattr(kael.Tensor, f.name + "_", None)) == has_inplace_method, f"Tensor.{f.name}_"
    if "function" in f.variants and module is kael:
        # kael.where is a Python function around _C.where (it adds the one-argument form)
        assert inspect.unwrap(kael.__dict__[f.name]) is kael._C.__dict__[f.name]
        assert f.name in kael.__all__


@pytest.mark.parametrize("f", POINTWISE, ids=IDS)
def test_stub(f, pyi):
    assert pyi.startswith("# @generated from codegen/templates/_C.pyi.j2")
    n = re.escape(f.name)
    if "function" in f.variants:
        assert re.search(rf"^def {n}\(input: Tensor", pyi, re.M), f"def {f.name}( missing from _C.pyi"
    if "method" in f.variants:
        assert re.search(rf"^    def {n}\(self[,)]", pyi, re.M), f"Tensor.{f.name} missing from _C.pyi"
    if f.inplace and "method" in f.variants:
        assert re.search(rf"^    def {n}_\(self[,)]", pyi, re.M), f"Tensor.{f.name}_ missing from _C.pyi"
    assert f'"""{f.doc}"""' in pyi


@pytest.mark.parametrize("f", POINTWISE, ids=IDS)
def test_docstring(f):
    if "function" in f.variants:
        doc = kael.__dict__[f.name].__doc__
        sig = f.schema.signature_text()
        # pointwise functions also take out= (the derived `op_out` variant)
        sig = sig[:-1] + (", " if sig[-2] != "(" else "") + \
            ("" if any(p.kwonly for p in f.schema.params) else "*, ") + "Tensor? out=None)"
        if len(BY_NAME[f.name]) > 1:  # every overload's signature, in the order they are tried
            sig = "\n".join(with_requires_grad(g, False) for g in try_order(BY_NAME[f.name]))
        assert doc == f"{sig}\n\n{f.doc}"
    if "method" in f.variants:
        doc = kael.Tensor.__dict__[f.name].__doc__
        sig = "\n".join(g.schema.signature_text(skip_self=True) for g in try_order(BY_NAME[f.name]))
        assert doc == f"{sig}\n\n{f.doc}"
    if f.inplace and "method" in f.variants:
        doc = kael.Tensor.__dict__[f.name + "_"].__doc__
        assert doc == f"{inplace_signatures(f)}\n\nIn-place version of {f.name}. {f.doc}"


def inplace_signatures(f):
    """The signatures of Tensor.<name>_ in the order they are tried: the derived in-place form,
    then the hand-written in-place entries of that name (div_.Tensor_mode), which join it."""
    lines = [f.name + "_" + f.schema.signature_text(skip_self=True)[len(f.name):]]
    lines += [g.schema.signature_text(skip_self=True) for g in try_order(BY_NAME.get(f.name + "_", []))]
    return "\n".join(lines)


# ---------------------------------------------------------------- results

def positive(*shape):
    return torch.rand(*shape, dtype=torch.float32) * 2 + 0.5


def kael_call(f, *args):
    """Calls the op through kael.<name>, or Tensor.<name> for method-only ops."""
    if "function" in f.variants:
        return getattr(kael, f.name)(*args)
    return getattr(args[0], f.name)(*args[1:])


@pytest.mark.parametrize("f", POINTWISE, ids=IDS)
def test_matches_torch(f):
    assert hasattr(torch, f.name), f"torch.{f.name} does not exist: compare {f.name} by hand"
    top = getattr(torch, f.name)
    ts = [positive(3, 4) for _ in f.schema.tensor_params]
    ks = [to_kael(t) for t in ts]
    expected = top(*ts)
    check(kael_call(f, *ks), expected)
    if "method" in f.variants:
        check(getattr(ks[0], f.name)(*ks[1:]), expected)
    if f.inplace and "method" in f.variants:
        x, tx = to_kael(ts[0]), ts[0].clone()
        assert getattr(x, f.name + "_")(*ks[1:]) is x
        if hasattr(tx, f.name + "_"):  # in place keeps self's dtype (logical_and_ of floats)
            getattr(tx, f.name + "_")(*ts[1:])
            check(x, tx)
        else:  # torch has no Tensor.maximum_: the result cast to self's dtype
            check(x, expected.to(ts[0].dtype))
    check(ks[0], ts[0])  # the out-of-place calls left the input alone


# heaviside takes two tensors of one dtype, as torch's (a number is a TypeError: test_composites.py)
TENSORS_ONLY = {"heaviside"}
BINARY = [f for f in POINTWISE if f.operand_inputs and f.name not in TENSORS_ONLY]


@pytest.mark.parametrize("f", BINARY, ids=[f.name for f in BINARY])
def test_python_numbers_for_either_input(f):
    n = len(f.schema.tensor_params)
    ts = [positive(2, 3) for _ in range(n)]
    ks = [to_kael(t) for t in ts]
    # torch does not take a number everywhere (torch.add(1.5, t), torch.maximum(t, 1.5)), so the
    # number becomes a full float32 tensor on the torch side: the result dtype is the same.
    top, full = getattr(torch, f.name), torch.full_like(ts[0], 1.5)
    for i in range(n):  # a number in each position in turn
        check(kael_call(f, *ks[:i], 1.5, *ks[i + 1:]), top(*ts[:i], full, *ts[i + 1:]))
    if "function" in f.variants:
        with pytest.raises(TypeError, match=f"{f.name}: expected at least one tensor argument"):
            getattr(kael, f.name)(*[1.5 + i for i in range(n)])


# ---------------------------------------------------------------- the dispatcher

def test_registered_ops():
    ops = kael._C._registered_ops()
    assert len(ops) == len(set(ops))
    expected = set()
    for f in REGISTRY:
        expected.add(f.schema.full_name)
        if f.is_pointwise and f.inplace:
            expected.add(f.name + "_")
        if f.is_pointwise:
            expected.add(f.name + ".out")
        if f.out:  # out: exact or castable (a non-pointwise entry's generated out=)
            expected.add(f.schema.full_name + ".out")
    assert set(ops) == expected
    for f in POINTWISE:
        assert f.name in ops and f.name + ".out" in ops
        assert (f.name + "_" in ops) == f.inplace, f.name


# ---------------------------------------------------------------- overloads

OVERLOADED = sorted(name for name, group in BY_NAME.items() if len(group) > 1)


@pytest.mark.parametrize("name", OVERLOADED)
def test_overload_mismatch_lists_every_signature(name):
    group = BY_NAME[name]
    method = "function" not in group[0].variants
    fn = getattr(kael.ones(2), name) if method else getattr(kael, name)
    with pytest.raises(TypeError) as info:
        fn(object())
    msg = str(info.value)
    assert msg.startswith(f"{name}() received an invalid combination of arguments - got (object), "
                          "but expected one of:")
    prefix = "Tensor." if method else ""
    lines = [f" * {prefix}{with_requires_grad(f, method)}" for f in try_order(group)]
    base = [f for f in BY_NAME.get(name[:-1], []) if f.inplace]
    if name.endswith("_") and base:  # joined to a pointwise op's derived in-place method
        lines = [f" * Tensor.{line}" for line in inplace_signatures(base[0]).splitlines()]
    listed = msg.splitlines()[1:]
    if name == "to":  # Tensor.to also says what it takes (csrc/arg_parsing.cpp)
        assert listed.pop() == "to() expects a dtype, a device name or a tensor"
    assert listed == lines  # every overload, in the order they are tried


def with_requires_grad(f, method):
    """The signature as errors show it: factories (functions with a device argument) also take
    requires_grad=, as in PyTorch."""
    text = f.schema.signature_text(skip_self=method)
    if not method and f.is_pointwise:  # (a pointwise op's function also takes out=)
        star = "" if any(p.kwonly for p in f.schema.params) else "*, "
        return text[:-1] + (", " if text[-2] != "(" else "") + star + "Tensor? out=None)"
    if method or not any(p.type.base == "Device" for p in f.schema.params):
        return text
    star = "" if any(p.kwonly for p in f.schema.params) else "*, "
    return text[:-1] + (", " if text[-2] != "(" else "") + star + "bool requires_grad=False)"


def try_order(group):
    """codegen/README.md, "Overloads in Python": registry order, except that an overload taking a
    Tensor where another takes a Scalar or a float of the same name comes first (PyTorch's order)."""
    tensor_names = {p.name for f in group for p in f.schema.params if p.type.base == "Tensor"}
    return sorted(group, key=lambda f: sum(p.type.base in ("Scalar", "float") and p.name in tensor_names
                                           for p in f.schema.params))
