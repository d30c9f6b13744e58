"""The registry's samples (the `samples:` key of native_functions.yaml) of the entries without
a derivative formula, run in kael and in torch: results of the same shapes, dtypes and values.
The entries with one run theirs in test/python/autograd/test_autograd_ops.py, gradients too.
The parser's checks of a sample are tested at the end."""
import numpy as np
import pytest
import torch

import kael
from codegen.model import CodegenError, parse_registry
from helpers import check, to_kael
from registry_samples import REGISTRY, registry_cases, values

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
    _compare(case.fn(kael, *kin), case.fn(torch, *tin), case)


# Public entries that neither a derivative formula's cases nor the pointwise harness cover and
# that have no samples yet (their tests are hand-written files of test/python/ops): the list
# only shrinks, and a new entry comes with samples.
WITHOUT_SAMPLES = {
    "addmm_", "adjoint", "all", "allclose", "aminmax", "any", "arange", "arange.start", "argwhere",
    "atleast_1d", "atleast_1d.Sequence", "atleast_2d", "atleast_2d.Sequence", "atleast_3d",
    "atleast_3d.Sequence", "baddbmm_", "bernoulli.p", "block_diag", "broadcast_tensors", "broadcast_to",
    "bucketize.Scalar", "cartesian_prod", "cauchy_", "cdist", "chunk", "clamp", "clamp.Tensor", "clamp_",
    "clamp_.Tensor", "column_stack", "contiguous", "conv1d", "conv1d.padding", "conv2d", "conv2d.padding",
    "conv_transpose1d", "conv_transpose2d", "convolution_backward_bias", "convolution_backward_input",
    "convolution_backward_weight", "corrcoef", "cov", "cross", "cummax", "cummin", "detach", "diag", "diff",
    "dist", "div.Scalar_mode", "div.Tensor_mode", "div_.Scalar_mode", "div_.Tensor_mode", "dot", "dropout",
    "dsplit.array", "dsplit.int", "dstack", "einsum", "empty", "empty_like", "empty_strided", "equal",
    "expand_as", "exponential_", "eye", "fill_.Tensor", "fill_diagonal_", "flatten", "fliplr", "flipud",
    "float_power.Scalar", "float_power.Tensor_Scalar", "float_power.Tensor_Tensor", "float_power_.Scalar",
    "float_power_.Tensor", "full", "full_like", "gelu", "geometric_", "get_device", "hsplit.array",
    "hsplit.int", "hstack", "inner", "is_complex", "is_conj", "is_floating_point", "is_neg", "is_nonzero",
    "is_same_size", "is_signed", "isclose", "isin.Scalar_Tensor", "isin.Tensor_Scalar", "isneginf", "isposinf",
    "kron", "kthvalue", "ldexp", "linear", "linspace", "log_normal_", "logcumsumexp", "logit", "logit_",
    "logspace", "masked_fill.Scalar", "masked_fill.Tensor", "masked_fill_.Scalar", "masked_fill_.Tensor",
    "masked_scatter", "masked_scatter_", "max.other", "median", "median.dim", "meshgrid", "min.other", "mm",
    "moveaxis", "moveaxis.int", "movedim", "movedim.int", "msort", "multinomial", "mv", "nan_to_num",
    "nan_to_num_", "nanmean", "nanmedian", "nanmedian.dim", "nanquantile", "nanquantile.scalar", "nansum",
    "narrow", "native_batch_norm_backward_input", "native_batch_norm_backward_weight", "nonzero_numpy",
    "norm.str", "normal.Tensor_Tensor", "normal.Tensor_float", "normal.float_Tensor", "normal.float_float",
    "numel", "ones", "ones_like", "outer", "positive", "quantile", "quantile.scalar", "rand", "rand_like",
    "randint", "randint.low", "randint_like", "randint_like.low", "randn", "randn_like", "randperm", "ravel",
    "renorm", "repeat_interleave.Tensor", "repeat_interleave.self_Tensor", "repeat_interleave.self_int",
    "reshape", "reshape_as", "resolve_conj", "resolve_neg", "rot90", "round.decimals", "round_.decimals",
    "scaled_dot_product_attention", "scatter.src_reduce", "scatter.value_reduce", "scatter_.src_reduce",
    "scatter_.value_reduce", "searchsorted.Scalar", "split", "split.sizes", "split_with_sizes", "square",
    "square_", "stack", "std_mean", "std_mean.correction", "std_mean.dim", "sum_to_size", "swapaxes",
    "swapdims", "t", "take", "take_along_dim", "tensor_split.indices", "tensor_split.sections",
    "tensor_split.tensor_indices_or_sections", "tile", "to.dtype", "to.other", "trace", "trapezoid.dx",
    "trapezoid.x", "trapz.dx", "trapz.x", "triu_indices", "type_as", "unbind", "unflatten", "unfold", "vander",
    "var_mean", "var_mean.correction", "var_mean.dim", "vdot", "view.dtype", "view_as", "vsplit.array",
    "vsplit.int", "vstack", "where.condition", "zero_", "zeros", "zeros_like",
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
