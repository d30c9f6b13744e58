"""kael.nn.functional: the stateless neural-network ops, as torch.nn.functional.

Ops that torch keeps out of its top-level namespace (gelu, silu, softplus) live only here; the
registry binds them in kael._C.
"""
import warnings as _warnings

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


# ---------------------------------------------------------------- neural-network ops


def _softmax_dim(ndim: int) -> int:
    # PyTorch's legacy choice when dim is not given.
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(input, dim=None, dtype=None): exp(x) / sum(exp(x)) along dim (kael.softmax)."""
    if dim is None:
        _warnings.warn("Implicit dimension choice for softmax has been deprecated. Change the call to include dim=X "
                       "as an argument.", stacklevel=_stacklevel)
        dim = _softmax_dim(input.dim())
    return _C.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """log_softmax(input, dim=None, dtype=None): x - logsumexp(x) along dim (kael.log_softmax)."""
    if dim is None:
        _warnings.warn("Implicit dimension choice for log_softmax has been deprecated. Change the call to include "
                       "dim=X as an argument.", stacklevel=_stacklevel)
        dim = _softmax_dim(input.dim())
    return _C.log_softmax(input, dim, dtype=dtype)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Layer normalisation over the last len(normalized_shape) dims (kael.layer_norm)."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    return _C.layer_norm(input, tuple(normalized_shape), weight, bias, eps)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """The rows of weight at the indices in input (kael.embedding(weight, input, padding_idx))."""
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: max_norm, scale_grad_by_freq and sparse are not supported yet")
    if padding_idx is None:
        padding_idx = -1
    else:
        rows = weight.size(0)
        if padding_idx > 0:
            assert padding_idx < rows, "Padding_idx must be within num_embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -rows, "Padding_idx must be within num_embeddings"
            padding_idx = rows + padding_idx
    return _C.embedding(weight, input, padding_idx)


def linear(input, weight, bias=None):
    """input @ weight.T + bias (kael.linear)."""
    return _C.linear(input, weight, bias)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """Cross-entropy of logits and class indices (or class probabilities) from kael.cross_entropy_losses,
    reduced by reduction ('none', 'mean' over the targets not ignored, or 'sum')."""
    if weight is not None or size_average is not None or reduce is not None:
        raise NotImplementedError("cross_entropy: weight, size_average and reduce are not supported yet")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    losses = _C.cross_entropy_losses(input, target, ignore_index, label_smoothing)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    if target.is_floating_point():
        return losses.mean() if losses.dim() > 0 else losses
    count = (target != ignore_index).sum()
    return losses.sum() / count


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(query @ key.mT * scale + attn_mask) @ value, fused (kael.scaled_dot_product_attention)."""
    if enable_gqa:
        raise NotImplementedError("scaled_dot_product_attention: enable_gqa is not supported yet")
    return _C.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale=scale)
# ---- shape and indexing


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """The int64 one-hot encoding of an int64 index tensor, in a new last dim of num_classes
    entries (max + 1 when -1)."""
    return _C.one_hot(tensor, num_classes)
