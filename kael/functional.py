"""Python-level spellings of registry ops whose torch signature the generated parsers do not
take directly (variadic tensors), as torch.functional."""
from __future__ import annotations

import functools

from kael import _C
from kael._C import Tensor

__all__ = ["allclose", "broadcast_tensors", "einsum", "equal", "unique", "unique_consecutive"]


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """Expands the tensors to their common broadcast shape (views, no copies)."""
    return _C.broadcast_tensors(tensors)


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    """Whether every element of input is close to other's (kael.isclose), as a Python bool."""
    close = _C.isclose(input, other, rtol, atol, equal_nan)
    return bool(_C.logical_not(close).sum().item() == 0)


def equal(input: Tensor, other: Tensor) -> bool:
    """Whether the tensors have the same shape and the same values (NaN equals nothing)."""
    if not isinstance(input, Tensor) or not isinstance(other, Tensor):
        raise TypeError(f"equal: expected two tensors, got {type(input).__name__} and {type(other).__name__}")
    if input.shape != other.shape:
        return False
    return bool(_C.ne(input, other).sum().item() == 0)


def einsum(equation: str, *operands) -> Tensor:
    """Einstein summation over the operands (given one by one or as one list), as torch.einsum."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return _C.einsum(equation, operands)


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

# ---- nonzero(as_tuple=), where(condition)

def nonzero(input: Tensor, *, as_tuple: bool = False):
    """The indices of the nonzero elements of input: an (n, input.dim()) tensor, or with as_tuple
    one 1-d tensor per dim (a 0-d input counts as 1-d), as torch.nonzero."""
    if as_tuple:
        return tuple(_C.nonzero_numpy(input))
    return _C.nonzero(input)


@functools.wraps(_C.where)  # the docstring and signature of where(condition, input, other)
def where(condition: Tensor, *args, **kwargs):
    """where(condition, input, other): input where condition holds, other elsewhere; with the
    condition alone, nonzero(condition, as_tuple=True), as torch.where."""
    if not args and not kwargs:
        return tuple(_C.nonzero_numpy(condition))
    return _C.where(condition, *args, **kwargs)
