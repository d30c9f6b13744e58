"""The registry's samples (the `samples:` key of native_functions.yaml) of the entries without
a derivative formula, run in kael and in torch: results of the same shapes, dtypes and values
(in float32 and float64).
The entries with one run theirs in test/python/autograd/test_autograd_ops.py, gradients too.
The parser's checks of a sample are tested at the end."""
import warnings

import numpy as np
import pytest
import torch

import kael
from helpers import check, to_kael
from registry_samples import REGISTRY, registry_cases, values  # (first: it puts the repository on sys.path)
from codegen.model import CodegenError, parse_registry

CASES = registry_cases()
NO_FORMULA = sorted(name for name in CASES if not next(e for e in REGISTRY if e.schema.full_name == name).derivatives)


def _params():
    return [pytest.param(name, i, id=f"{name}-{i}") for name in NO_FORMULA for i in range(len(CASES[name]))]


def _compare(kres, tres, case):
    if isinstance(tres, (bool, int, float)):  # numel, equal, is_nonzero, ...
        assert type(kres) is type(tres) and kres == tres, (kres, tres)
        return
    if isinstance(tres, (tuple, list)):
        assert isinstance(kres, (tuple, list)) and len(kres) == len(tres)
        for k, t in zip(kres, tres):
            _compare(k, t, case)
        return
    check(kres.detach() if isinstance(kres, kael.Tensor) else kres, tres.detach(), atol=case.atol, rtol=case.rtol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,index", _params())
def test_sample_matches_torch(name, index, dtype):
    case = CASES[name][index]
    rng = np.random.default_rng(index + 7)
    tin, kin = [], []
    for spec in case.specs:
        v = values(spec, rng)
        if spec.kind == "float":
            v = v.to(getattr(torch, dtype))
        tin.append(v)
        kin.append(to_kael(v))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the values are compared here (torch warns of deprecated forms)
        _compare(case.fn(kael, *kin), case.fn(torch, *tin), case)


# Public entries that neither a derivative formula's cases nor the pointwise harness cover and
# that have no samples: the random ones (their values depend on the generator; test_random.py
# checks their distributions), the uninitialised factories, and the kael-only backward kernels
# (reached through their forward ops). The list only shrinks; a new entry comes with samples.
WITHOUT_SAMPLES = {
    "bernoulli.p", "cauchy_", "convolution_backward_bias", "convolution_backward_input",
    "convolution_backward_weight", "dropout", "empty", "empty_like", "empty_strided", "exponential_",
    "geometric_", "log_normal_", "multinomial", "native_batch_norm_backward_input",
    "native_batch_norm_backward_weight", "normal.Tensor_Tensor", "normal.Tensor_float", "normal.float_Tensor",
    "normal.float_float", "rand", "rand_like", "randint", "randint.low", "randint_like", "randint_like.low",
    "randn", "randn_like", "randperm",
}


def _uncovered():
    return {e.schema.full_name for e in REGISTRY if not e.samples and not e.derivatives and not e.is_pointwise
            and not e.name.startswith("_") and not e.name.endswith("_backward")}


def test_public_entries_have_samples_or_are_listed():
    uncovered = _uncovered()
    assert sorted(uncovered - WITHOUT_SAMPLES) == [], "give these entries samples: in native_functions.yaml"
    assert sorted(WITHOUT_SAMPLES - uncovered) == [], "these have samples now (or are gone): take them off the list"


@pytest.mark.parametrize("sample,error", [
    ("L.add(x, 1)", "uses x"),
    ("L.add(f(3), ", "is not a Python expression"),
    ("__import__('os')", "uses __import__"),
    ({"call": "L.neg(f(3))", "noncontig": "yes"}, "'noncontig' must be true or false"),
    ({"call": "L.neg(f(3))", "atol": -1}, "'atol' and 'rtol' must be non-negative numbers"),
    ({"call": "L.neg(f(3))", "tolerance": 1}, "unknown key(s) tolerance"),
    ({"noncontig": False}, "a sample is a call"),
])
def test_the_parser_refuses_a_bad_sample(sample, error):
    text = ("- func: neg2(Tensor self) -> Tensor\n  dispatch: {CPU: neg2_cpu}\n  doc: x.\n  samples:\n    - "
            + (repr(sample) if isinstance(sample, str) else str(sample)) + "\n")
    with pytest.raises(CodegenError, match=error.replace("(", r"\(").replace(")", r"\)")):
        parse_registry(text, "test.yaml")
