"""The registry's samples (the `samples:` key of native_functions.yaml, codegen.model.Sample) as
runnable cases: the inputs a sample's makers describe, made once and given to kael and to torch,
and the call as a function of the library and those inputs.

    case = case_from_sample(sample)
    torch_result = case.fn(torch, *torch_inputs)
    kael_result = case.fn(kael, *kael_inputs)

test/python/autograd/test_autograd_ops.py compares gradients through them and
test/python/ops/test_registry_samples.py values."""
from __future__ import annotations

import ast
import builtins
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from codegen.model import SAMPLE_MAKERS, parse_registry  # noqa: E402

REGISTRY = parse_registry((ROOT / "native_functions.yaml").read_text(), "native_functions.yaml")


class Spec:
    """One input: a float tensor that requires grad (domain: any, pos, unit, prob, nonzero), or a
    constant int64 (index, perm) or bool (mask) tensor."""

    def __init__(self, shape, domain="any", kind="float", high=None):
        self.shape, self.domain, self.kind, self.high = tuple(shape), domain, kind, high


def f(*shape, domain="any"):
    return Spec(shape, domain)


def idx(*shape, high):
    return Spec(shape, kind="index", high=high)


def perm_idx(*shape):
    """int64 indices, each row a permutation of range(shape[-1]) (scatter without collisions)."""
    return Spec(shape, kind="perm")


def mask(*shape):
    return Spec(shape, kind="mask")


MAKERS = {"f": f, "idx": idx, "perm_idx": perm_idx, "mask": mask}
assert set(MAKERS) == set(SAMPLE_MAKERS)


def values(spec, rng):
    """The input's values as a float64 (or int64, bool) torch tensor."""
    n = int(np.prod(spec.shape)) if spec.shape else 1
    if spec.kind == "index":
        return torch.tensor(rng.integers(0, spec.high, size=spec.shape), dtype=torch.int64)
    if spec.kind == "perm":
        rows = int(np.prod(spec.shape[:-1])) if len(spec.shape) > 1 else 1
        a = np.stack([rng.permutation(spec.shape[-1]) for _ in range(rows)]).reshape(spec.shape)
        return torch.tensor(a, dtype=torch.int64)
    if spec.kind == "mask":
        return torch.tensor(rng.random(size=spec.shape) > 0.5)
    if spec.domain == "pos":
        v = rng.uniform(0.3, 2.0, size=n)
    elif spec.domain == "unit":
        v = rng.uniform(-0.8, 0.8, size=n)
    elif spec.domain == "prob":
        v = rng.uniform(0.1, 0.9, size=n)
    else:  # any / nonzero: magnitudes away from 0 (kinks of abs, relu, fmod, ...)
        v = rng.uniform(0.2, 2.0, size=n) * rng.choice([-1.0, 1.0], size=n)
    return torch.tensor(v.reshape(spec.shape), dtype=torch.float64)


class Case:
    """fn(lib, *inputs) over the inputs specs describes."""

    def __init__(self, fn, *specs, noncontig=True, atol=None, rtol=None, source=None):
        self.fn, self.specs, self.noncontig, self.atol, self.rtol = fn, specs, noncontig, atol, rtol
        self.source = source  # the sample's call, for a failure's message

    def __repr__(self):
        return self.source or getattr(self.fn, "__name__", "case")


class _Inputs(ast.NodeTransformer):
    """Replaces each maker call, in the order Python evaluates them, by _in[i] and keeps its Spec."""

    def __init__(self):
        self.specs = []

    def visit_Call(self, node):
        if isinstance(node.func, ast.Name) and node.func.id in MAKERS:
            spec = eval(compile(ast.Expression(node), "<sample>", "eval"), {"__builtins__": {}}, dict(MAKERS))
            self.specs.append(spec)
            return ast.copy_location(ast.Subscript(value=ast.Name("_in", ast.Load()),
                                                   slice=ast.Constant(len(self.specs) - 1), ctx=ast.Load()), node)
        return self.generic_visit(node)


def case_from_sample(sample) -> Case:
    tree = ast.parse(sample.call, mode="eval")
    inputs = _Inputs()
    body = inputs.visit(tree).body
    # lambda L, *_in: (lambda F: <body>)(L.nn.functional)
    inner = ast.Lambda(args=ast.arguments(posonlyargs=[], args=[ast.arg("F")], kwonlyargs=[], kw_defaults=[],
                                          defaults=[]), body=body)
    call_inner = ast.Call(func=inner, args=[ast.Attribute(ast.Attribute(ast.Name("L", ast.Load()), "nn", ast.Load()),
                                                          "functional", ast.Load())], keywords=[])
    outer = ast.Lambda(args=ast.arguments(posonlyargs=[], args=[ast.arg("L")], vararg=ast.arg("_in"), kwonlyargs=[],
                                          kw_defaults=[], defaults=[]), body=call_inner)
    expr = ast.fix_missing_locations(ast.Expression(outer))
    # real builtins: C code that imports lazily looks up __import__ in its caller's globals (the
    # registry's parser has checked the names a sample uses)
    fn = eval(compile(expr, f"<sample {sample.call}>", "eval"), {"__builtins__": builtins})
    return Case(fn, *inputs.specs, noncontig=sample.noncontig, atol=sample.atol, rtol=sample.rtol,
                source=sample.call)


def registry_cases() -> dict:
    """{entry full name: [Case, ...]} for every entry with samples."""
    out = {}
    for entry in REGISTRY:
        if entry.samples:
            out[entry.schema.full_name] = [case_from_sample(s) for s in entry.samples]
    return out
