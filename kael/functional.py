"""Python fronts of registry ops, as torch's own (torch.functional and its hand-written bindings):
each turns torch's argument forms into one call of one registered op. unique's and
unique_consecutive's results depend on return_inverse/return_counts and nonzero's on as_tuple (a
tensor or a tuple); tensordot's dims is an int, a pair of lists or a tensor."""
from __future__ import annotations

from kael import _C
from kael._C import Tensor

__all__ = ["unique", "unique_consecutive", "tensordot"]


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


# ---- tensordot(dims=)

def tensordot(a: Tensor, b: Tensor, dims=2, out: Tensor | None = None) -> Tensor:
    """The sum of products over the last dims dims of a and the first of b (dims an int), or over
    the pairs of dims given as two lists (or a (2, n) tensor), as torch.tensordot: the registry's
    tensordot(a, b, dims_a, dims_b) with torch's forms of dims (and its out=)."""
    if not isinstance(dims, (tuple, list, Tensor, int)):
        raise RuntimeError("tensordot expects dims to be int or tuple[list[int], list[int]] or "
                           f"list[list[int]] containing two lists, but got dims={dims}")
    if isinstance(dims, Tensor):
        dims = dims.tolist() if dims.numel() > 1 else int(dims.item())
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > min(a.dim(), b.dim()):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        dims_a, dims_b = list(range(-dims, 0)), list(range(dims))
    else:
        dims_a, dims_b = dims
    if out is None:
        return _C.tensordot(a, b, dims_a, dims_b)
    return _C.tensordot(a, b, dims_a, dims_b, out=out)
