"""kael.nn.functional: the stateless neural-network ops, as torch.nn.functional.

Ops that torch keeps out of its top-level namespace (gelu, silu, softplus) live only here; the
registry binds them in kael._C.
"""
import kael
from kael import _C
from kael._C import Tensor

# ---------------------------------------------------------------- activations


def gelu(input: Tensor, *, approximate: str = "none") -> Tensor:
    """x * Phi(x), Phi the standard normal CDF; approximate='tanh' uses the tanh approximation."""
    return _C.gelu(input, approximate=approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x)."""
    if inplace:
        return input.copy_(_C.silu(input))
    return _C.silu(input)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta * x)) / beta, and x where beta * x > threshold."""
    return _C.softplus(input, beta, threshold)


# ---- random



def dropout(input: kael.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> kael.Tensor:
    """Zeroes each element with probability p and scales the others by 1 / (1 - p) while training;
    returns input itself when training is False or p is 0 (as torch)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    result = kael.dropout(input, p, training)
    if inplace and result is not input:
        input.copy_(result)
        return input
    return result


# ---- shape and indexing


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """The int64 one-hot encoding of an int64 index tensor, in a new last dim of num_classes
    entries (max + 1 when -1)."""
    return _C.one_hot(tensor, num_classes)
