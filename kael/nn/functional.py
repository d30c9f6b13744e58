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
    if not target.is_floating_point():
        target = _class_targets("cross_entropy", input, target)
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


# ---- losses and activations of kael.nn's layers


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0)."""
    return input.relu_() if inplace else _C.relu(input)


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + exp(-x))."""
    return _C.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    """tanh(x)."""
    return _C.tanh(input)


def _class_targets(op, input, target):
    """Class-index targets as torch's nll_loss takes them: int64, or uint8 for inputs of one or
    two dims (read as int64); any other integer dtype is torch's RuntimeError."""
    if target.dtype == kael.int64:
        return target
    if target.dtype == kael.uint8 and input.dim() <= 2:
        return target.long()
    raise RuntimeError(f"{op}: expected target dtype to be Long" + (" or Byte" if input.dim() <= 2 else "")
                       + f", got {target.dtype}")


def _reduce(losses, reduction):
    if reduction == "none":
        return losses
    if reduction == "mean":
        return losses.mean()
    if reduction == "sum":
        return losses.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _check_reduction(reduction):
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _check_same_size(name, input, target):
    if tuple(input.shape) != tuple(target.shape):
        _warnings.warn(f"Using a target size ({list(target.shape)}) that is different to the input size "
                       f"({list(input.shape)}). This will likely lead to incorrect results due to broadcasting. "
                       "Please ensure they have the same size.", stacklevel=3)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Squared differences (input - target)^2, reduced."""
    if size_average is not None or reduce is not None or weight is not None:
        raise NotImplementedError("mse_loss: size_average, reduce and weight are not supported")
    _check_reduction(reduction)
    _check_same_size("mse_loss", input, target)
    # broadcast first, as torch does: a 0-d target then promotes as a tensor with dims
    input, target = kael.broadcast_tensors(input, target)
    diff = input - target
    return _reduce(diff * diff, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Absolute differences |input - target|, reduced."""
    if size_average is not None or reduce is not None:
        raise NotImplementedError("l1_loss: size_average and reduce are not supported")
    _check_reduction(reduction)
    _check_same_size("l1_loss", input, target)
    input, target = kael.broadcast_tensors(input, target)  # (as mse_loss)
    return _reduce((input - target).abs(), reduction)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """-input[n, target[n]] for log-probabilities input of shape (N, C, ...) or (C,), reduced
    ('mean' divides by the number of targets not equal to ignore_index)."""
    if weight is not None or size_average is not None or reduce is not None:
        raise NotImplementedError("nll_loss: weight, size_average and reduce are not supported")
    _check_reduction(reduction)
    if input.dim() < 1:
        raise ValueError(f"nll_loss: expected input with at least 1 dimension, got {input.dim()}")
    class_dim = 0 if input.dim() == 1 else 1
    expected = tuple(input.shape[:class_dim]) + tuple(input.shape[class_dim + 1:])
    if tuple(target.shape) != expected:
        raise ValueError(f"nll_loss: expected target of shape {list(expected)} for input of shape "
                         f"{list(input.shape)}, got {list(target.shape)}")
    target = _class_targets("nll_loss", input, target)
    classes = input.size(class_dim)
    ignored = target == ignore_index
    valid_targets = kael.where(ignored, kael.zeros_like(target), target)
    if bool(((valid_targets < 0).logical_or(valid_targets >= classes)).any().item()):
        bad = kael.masked_select(valid_targets, (valid_targets < 0).logical_or(valid_targets >= classes))
        raise IndexError(f"nll_loss: Target {bad[0].item()} is out of bounds (classes: {classes}).")
    picked = input.gather(class_dim, valid_targets.unsqueeze(class_dim)).squeeze(class_dim)
    losses = kael.where(ignored, kael.zeros_like(picked), -picked)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / (~ignored).sum()


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """max(x, 0) - x * t + log1p(exp(-|x|)), written with kael.maximum(x, 0) so that its gradient
    at x = 0 is sigmoid(0) - t (maximum splits a tie; relu would give -t). With pos_weight:
    (1 - t) * x + (1 + (pos_weight - 1) * t) * (log1p(exp(-|x|)) + max(-x, 0))."""
    if size_average is not None or reduce is not None:
        raise NotImplementedError("binary_cross_entropy_with_logits: size_average and reduce are not supported")
    _check_reduction(reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({list(target.shape)}) must be the same as input size ({list(input.shape)})")
    zeros = kael.zeros_like(input)
    softplus_tail = kael.log1p(kael.exp(-input.abs()))
    if pos_weight is None:
        losses = kael.maximum(input, zeros) - input * target + softplus_tail
    else:
        log_weight = (pos_weight - 1) * target + 1
        losses = (1 - target) * input + log_weight * (softplus_tail + kael.maximum(-input, zeros))
    if target.is_floating_point() and losses.dtype != target.dtype:
        # torch computes the losses in place in (1 - target): they take the target's dtype
        losses = losses.to(target.dtype)
    if weight is not None:
        losses = losses * weight
    return _reduce(losses, reduction)


def _attention_mask_to_float(mask, dtype, name):
    if mask is None:
        return None
    if mask.dtype == kael.bool:
        return kael.zeros(tuple(mask.shape), dtype=dtype).masked_fill(mask, float("-inf"))
    if not mask.is_floating_point():
        raise TypeError(f"multi_head_attention_forward: only bool and floating types of {name} are supported")
    return mask.to(dtype=dtype) if mask.dtype != dtype else mask
