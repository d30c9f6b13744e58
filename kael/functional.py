"""Python-level spellings of registry ops whose result's form depends on a flag (unique's and
unique_consecutive's return_inverse/return_counts, nonzero's as_tuple): a tensor or a tuple, as
torch's own Python and hand-written bindings return them."""
from __future__ import annotations

from kael import _C
from kael._C import Tensor

__all__ = ["unique", "unique_consecutive"]


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
           dim: int | None = None):
    """The sorted unique elements of input (slices along dim when given), with the inverse indices
    and the counts when asked for: a tensor, or a tuple as torch.unique returns."""
    if dim is None:
        output, inverse, counts = _C._unique2(input, sorted, return_inverse, return_counts)
    else:
        output, inverse, counts = _C._unique_dim(input, dim, sorted, return_inverse, return_counts)
    return _unique_result(output, inverse, counts, return_inverse, return_counts)


def _unique_result(output, inverse, counts, return_inverse, return_counts):
    """output alone, or the tuple of output and the parts asked for, as torch's unique returns."""
    if return_inverse and return_counts:
        return output, inverse, counts
    if return_inverse:
        return output, inverse
    if return_counts:
        return output, counts
    return output


def unique_consecutive(input: Tensor, return_inverse: bool = False, return_counts: bool = False,
                       dim: int | None = None):
    """The first element (slice along dim) of each run of equal consecutive ones, with the inverse
    indices and the run lengths when asked for: a tensor, or a tuple as torch.unique_consecutive
    returns. NaN equals nothing: each NaN is a run of its own."""
    output, inverse, counts = _C._unique_consecutive(input, return_inverse, return_counts, dim)
    return _unique_result(output, inverse, counts, return_inverse, return_counts)


# ---- nonzero(as_tuple=)

def nonzero(input: Tensor, *, as_tuple: bool = False):
    """The indices of the nonzero elements of input: an (n, input.dim()) tensor, or with as_tuple
    one 1-d tensor per dim (a 0-d input counts as 1-d), as torch.nonzero."""
    if as_tuple:
        return tuple(_C.nonzero_numpy(input))
    return _C.nonzero(input)
