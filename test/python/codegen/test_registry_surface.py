"""Every public op of kael and kael.Tensor is to be a registry entry. The functions still written
in Python over registered ops (kael/_composites.py, kael/functional.py) are listed here by
section; a name that moves into the registry must leave the list (the list only shrinks), and a
new Python op must not appear. ALLOWED are the Python conveniences that are not ops."""
import pytest

from registry_surface import non_registry_names, python_composites

# Conveniences that are not ops and stay in Python.
ALLOWED = {
    # shapes in, a shape out: no tensor; Tensor.numel's Python int as a function
    "kael": {"broadcast_shapes", "numel"},
    "Tensor": set(),
}

# Still written in Python, one group per section of kael/_composites.py (then kael/functional.py).
REMAINING = {
    "kael": {
        # products
        "mm", "mv", "dot", "bmm", "addmm", "baddbmm", "addcmul", "addcdiv",
        # pointwise
        "xlogy", "float_power",
        # indexing and shapes, and the sections after it
        "take", "tensor_split", "rot90", "median", "tensordot", "cdist", "var_mean", "std_mean", "aminmax",
        "msort", "quantile", "cov", "corrcoef", "trapezoid", "trapz", "ravel", "column_stack", "row_stack",
        "dstack", "kron", "inner", "vdot", "block_diag", "cartesian_prod", "cross", "isin", "is_nonzero",
        "is_same_size", "ldexp", "cummax", "cummin", "logcumsumexp", "masked_scatter", "kthvalue", "nanmedian",
        "nanquantile", "histc", "positive", "dist", "atleast_3d", "hsplit", "vsplit", "dsplit",
        "is_floating_point", "vander", "renorm", "is_signed", "is_complex", "is_conj", "is_neg", "resolve_conj",
        "resolve_neg", "get_device",
        # kael/functional.py: Python spellings over registry ops, as torch.functional (variadic tensors,
        # results whose number depends on flags, Python bools)
        "allclose", "atleast_1d", "atleast_2d", "broadcast_tensors", "einsum", "equal", "meshgrid", "nonzero",
        "unique", "unique_consecutive", "where",
    },
    "Tensor": {
        # products
        "mm", "mv", "dot", "addcmul", "addcmul_", "addcdiv", "addcdiv_",
        # pointwise
        "xlogy", "float_power",
        # indexing and shapes, and the sections after it
        "take", "tensor_split", "rot90", "median", "aminmax", "msort", "quantile", "cov", "corrcoef", "ravel",
        "kron", "inner", "vdot", "cross", "is_nonzero", "is_same_size", "ldexp", "cummax", "cummin",
        "logcumsumexp", "masked_scatter", "masked_scatter_", "exponential_", "log_normal_", "cauchy_",
        "geometric_", "kthvalue", "nanmedian", "nanquantile", "histc", "positive", "dist", "hsplit", "vsplit",
        "dsplit", "unfold", "sum_to_size", "fill_diagonal_", "renorm", "is_signed", "is_complex", "is_conj",
        "is_neg", "resolve_conj", "resolve_neg", "get_device",
    },
}


@pytest.mark.parametrize("space", ["kael", "Tensor"])
def test_python_ops_are_only_the_listed_ones(space):
    python = python_composites()[space] - ALLOWED[space]
    new = sorted(python - REMAINING[space])
    assert not new, f"{space}: ops written in Python that no registry entry generates: {new}"
    moved = sorted(REMAINING[space] - python)
    assert not moved, f"{space}: generated now or gone, take them off REMAINING: {moved}"


def test_allowed_names_exist():
    where = non_registry_names()
    for space, names in ALLOWED.items():
        assert names <= set(where[space]), sorted(names - set(where[space]))
