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
    """Layer normalisation over the last len(normalized_shape) dims (kael.layer_norm); a sequence
    of sizes, as torch's (nn.LayerNorm also takes one int)."""
    return _C.layer_norm(input, normalized_shape, weight, bias, eps)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """The rows of weight at the indices in input (kael.embedding(weight, input, padding_idx)).
    max_norm: first, outside autograd, every row that input indexes and whose norm_type-norm
    exceeds max_norm is scaled in place to max_norm / (norm + 1e-7) of itself (torch's
    embedding_renorm_). scale_grad_by_freq: each row's gradient is divided by the number of
    times input holds its index (the gradient of each looked-up row scaled by 1 / that count on
    its way into embedding's backward)."""
    if sparse:
        raise NotImplementedError("embedding: sparse gradients are not supported (kael has no sparse tensors)")
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    if padding_idx is None:
        padding_idx = -1
    else:
        rows = weight.size(0)
        if padding_idx > 0:
            assert padding_idx < rows, "Padding_idx must be within num_embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -rows, "Padding_idx must be within num_embeddings"
            padding_idx = rows + padding_idx
    out = _C.embedding(weight, input, padding_idx)
    if scale_grad_by_freq and out.requires_grad:
        with kael.no_grad():
            flat = input.reshape(-1)
            counts = kael.bincount(flat, minlength=weight.size(0)).index_select(0, flat)
            scale = counts.reshape(tuple(input.shape) + (1,)).to(out.dtype).reciprocal()
        out.register_hook(lambda grad: grad * scale)
    return out


def _embedding_renorm_(weight, input, max_norm, norm_type):
    """torch's embedding_renorm_: the rows indexed, each once, scaled by max_norm / (norm + 1e-7)
    (computed in double, applied in weight's dtype) where their norm exceeds max_norm."""
    with kael.no_grad():
        rows = kael.unique(input.flatten())
        if rows.numel() == 0:
            return
        picked = weight.index_select(0, rows)
        norms = kael.norm(picked, norm_type, [1])
        scale = (max_norm / (norms.to(kael.float64) + 1e-7)).to(weight.dtype)
        renormed = kael.where((norms > max_norm).unsqueeze(1), picked * scale.unsqueeze(1), picked)
        weight[rows] = renormed


def linear(input, weight, bias=None):
    """input @ weight.T + bias (kael.linear)."""
    return _C.linear(input, weight, bias)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """Cross-entropy of logits and class indices (or class probabilities) from kael.cross_entropy_losses,
    reduced by reduction ('none', 'mean' over the targets not ignored, or 'sum')."""
    reduction = _loss_args(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if not target.is_floating_point():
        target = _class_targets("cross_entropy", input, target)
    if weight is not None:
        return _weighted_cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)
    losses = _C.cross_entropy_losses(input, target, ignore_index, label_smoothing)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    if target.is_floating_point():
        return losses.mean() if losses.dim() > 0 else losses
    count = (target != ignore_index).sum()
    return losses.sum() / count


def _weighted_cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing):
    """cross_entropy with class weights, as torch composes it: log_softmax, then the weighted
    nll_loss (class indices) or the weighted sum of -target * log-probabilities (probabilities);
    label smoothing mixes in the weighted sum over every class, divided by the class count."""
    class_dim = 1 if input.dim() >= 2 else 0
    classes = input.size(class_dim)
    _check_class_weight(weight, classes)
    logp = log_softmax(input, class_dim)
    shape = [1] * input.dim()
    shape[class_dim] = classes
    w = weight.reshape(shape)
    if target.is_floating_point():
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / classes
        losses = -(logp * target * w)
        if reduction == "none":
            return losses.sum(class_dim)
        if reduction == "sum":
            return losses.sum()
        return losses.sum() / (input.numel() / classes) if input.numel() else losses.sum() * float("nan")
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing <= 0:
        return nll
    ignored = target == ignore_index
    smooth = -(logp * w).sum(class_dim)
    smooth = kael.where(ignored, kael.zeros_like(smooth), smooth)
    if reduction == "none":
        smooth_reduced = smooth
    elif reduction == "sum":
        smooth_reduced = smooth.sum()
    else:
        kept = kael.masked_select(target, ~ignored)
        smooth_reduced = smooth.sum() / weight.gather(0, kept.flatten()).sum()
    return nll * (1 - label_smoothing) + smooth_reduced * (label_smoothing / classes)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(query @ key.mT * scale + attn_mask) @ value, fused (kael.scaled_dot_product_attention).
    enable_gqa: key and value may have fewer heads (dim -3) than query, a divisor of its count; each
    of their heads serves that many query heads in turn (torch's grouped-query attention)."""
    if enable_gqa and query.dim() >= 3 and key.dim() >= 3 and key.size(-3) != query.size(-3):
        heads, kv_heads = query.size(-3), key.size(-3)
        if kv_heads == 0 or heads % kv_heads != 0 or value.size(-3) != kv_heads:
            raise RuntimeError(f"scaled_dot_product_attention: the number of heads in key ({kv_heads}) and value "
                               f"({value.size(-3)}) must divide the number of heads in query ({heads})")
        key = key.repeat_interleave(heads // kv_heads, -3)
        value = value.repeat_interleave(heads // kv_heads, -3)
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
    reduction = _loss_args(size_average, reduce, reduction)
    _check_same_size("mse_loss", input, target)
    # broadcast first, as torch does: a 0-d target then promotes as a tensor with dims
    input, target = kael.broadcast_tensors(input, target)
    diff = input - target
    if weight is not None:
        return _weighted(diff * diff, weight, reduction)
    _check_reduction(reduction)
    return _reduce(diff * diff, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Absolute differences |input - target|, reduced (weighted per element with weight)."""
    reduction = _loss_args(size_average, reduce, reduction)
    _check_same_size("l1_loss", input, target)
    input, target = kael.broadcast_tensors(input, target)  # (as mse_loss)
    if weight is not None:
        return _weighted((input - target).abs(), weight, reduction)
    _check_reduction(reduction)
    return _reduce((input - target).abs(), reduction)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """-input[n, target[n]] for log-probabilities input of shape (N, C, ...) or (C,), reduced
    ('mean' divides by the number of targets not equal to ignore_index)."""
    reduction = _loss_args(size_average, reduce, reduction)
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
    if weight is not None:
        # each target's loss times its class's weight; 'mean' divides by the weights of the
        # targets not ignored (torch's nll_loss)
        _check_class_weight(weight, classes)
        counted = kael.where(ignored, kael.zeros_like(picked),
                             weight.gather(0, valid_targets.flatten()).reshape(picked.shape))
        # selected, not multiplied by a zero weight: with every target ignored the mean's
        # gradient is 1/0, and an ignored entry's gradient must stay 0 as torch's (not inf * 0)
        losses = kael.where(ignored, kael.zeros_like(picked), -picked * counted)
    else:
        counted = ~ignored
        losses = kael.where(ignored, kael.zeros_like(picked), -picked)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / counted.sum()


def _check_class_weight(weight, classes):
    if weight.dim() != 1 or weight.numel() != classes:
        raise RuntimeError(f"weight tensor should be defined either for all {classes} classes or no classes but got "
                           f"weight tensor of shape: {list(weight.shape)}")


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """max(x, 0) - x * t + log1p(exp(-|x|)), written with kael.maximum(x, 0) so that its gradient
    at x = 0 is sigmoid(0) - t (maximum splits a tie; relu would give -t). With pos_weight:
    (1 - t) * x + (1 + (pos_weight - 1) * t) * (log1p(exp(-|x|)) + max(-x, 0))."""
    reduction = _loss_args(size_average, reduce, reduction)
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


# ---------------------------------------------------------------- more activations
# Written over registered ops (autograd differentiates them), with torch's formulas.


def _maybe_in_place(input, result, inplace):
    return input.copy_(result) if inplace else result


def _where_branch(cond, input, branch, other, fill=0.0):
    """where(cond, branch(input), other), with branch evaluated on input only where cond holds
    (on `fill` elsewhere). where(cond, f(x), other) alone sends 0 * f'(x) back from the elements it
    drops, which is NaN where f'(x) is inf or NaN (exp of a large x): here the dropped elements
    never see x."""
    return kael.where(cond, branch(kael.where(cond, input, fill)), other)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x where x > 0, else negative_slope * x."""
    return _maybe_in_place(input, kael.where(input > 0, input, input * negative_slope), inplace)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else alpha * (exp(x) - 1)."""
    return _maybe_in_place(input, _where_branch(kael.logical_not(input > 0), input, lambda x: kael.expm1(x) * alpha, input), inplace)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(x, alpha) with the self-normalising constants."""
    return _maybe_in_place(input, _where_branch(kael.logical_not(input > 0), input, lambda x: kael.expm1(x) * (_SELU_ALPHA * _SELU_SCALE),
                                                input * _SELU_SCALE), inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    return _maybe_in_place(input, _where_branch(kael.logical_not(input > 0), input, lambda x: kael.expm1(x / alpha) * alpha, input),
                           inplace)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """clamp(x, min_val, max_val)."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    # torch's gradient is 0 at the bounds themselves (clamp's is 1 there)
    inside = kael.logical_and(input > min_val, input < max_val)
    return _maybe_in_place(input, kael.where(inside, input, kael.clamp(input, min_val, max_val).detach()), inplace)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(0, x), 6)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(x + 3, 0), 6) / 6 (the gradient 1/6 strictly between -3 and 3, as torch's)."""
    inside = kael.logical_and(input > -3, input < 3)
    return _maybe_in_place(input, kael.where(inside, (input + 3) / 6, (kael.clamp(input + 3, 0, 6) / 6).detach()),
                           inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * min(max(x + 3, 0), 6) / 6 (the gradient x / 3 + 0.5 strictly between -3 and 3, as torch's)."""
    inside = kael.logical_not(kael.logical_or(input <= -3, input >= 3))  # NaN inside: a NaN gradient, as torch
    outside = kael.where(input <= -3, kael.zeros_like(input), input)
    return _maybe_in_place(input, _where_branch(inside, input, lambda x: x * (x + 3) / 6, outside), inplace)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * tanh(softplus(x))."""
    return _maybe_in_place(input, input * kael.tanh(softplus(input)), inplace)


def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)) = -softplus(-x), without overflow."""
    return -softplus(-input)


def softsign(input: Tensor) -> Tensor:
    """x / (1 + |x|)."""
    return input / (input.abs() + 1)


def tanhshrink(input: Tensor) -> Tensor:
    """x - tanh(x)."""
    return input - kael.tanh(input)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    return kael.where(input > lambd, input - lambd, kael.where(input < -lambd, input + lambd, input * 0))


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x where |x| > lambd, else 0."""
    return kael.where(kael.logical_or(input < -lambd, input > lambd), input, input * 0)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """x where x > threshold, else value."""
    return _maybe_in_place(input, kael.where(input <= threshold, kael.full_like(input, value), input), inplace)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """a * sigmoid(b) for the two halves a, b of input along dim."""
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    size = input.shape[dim]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim % input.dim()} is size {size}")
    a, b = input.split(size // 2, dim)
    return a * kael.sigmoid(b)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-input)."""
    return softmax(-input, dim, _stacklevel + 1, dtype)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """x where x > 0, else weight * x, weight having one value or one per channel (dim 1)."""
    if weight.numel() != 1:
        if input.dim() < 2 and weight.numel() != (input.shape[0] if input.dim() else 1):
            raise RuntimeError("Mismatch of parameter numbers and input channel size.")
        channels = input.shape[1] if input.dim() >= 2 else input.shape[0]
        if weight.numel() != channels:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                               f"{weight.numel()} and channel size = {channels}.")
        if input.dim() >= 2:
            weight = weight.reshape([1, channels] + [1] * (input.dim() - 2))
    else:
        weight = weight.reshape([])
    return kael.where(input > 0, input, input * weight)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False) -> Tensor:
    """leaky_relu with slope (lower + upper) / 2 in eval mode, or a slope drawn from U(lower,
    upper) for each negative element in training mode."""
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    slopes = kael.empty_like(input).uniform_(lower, upper)
    return _maybe_in_place(input, kael.where(input >= 0, input, input * slopes), inplace)


# ---------------------------------------------------------------- normalisation


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None) -> Tensor:
    """input / max(||input||_p over dim, eps)."""
    if out is not None:
        raise NotImplementedError("normalize: out= is not supported")
    denom = kael.clamp_min(kael.norm(input, p, [dim], True), eps)
    return input / denom.expand_as(input)


def rms_norm(input: Tensor, normalized_shape, weight=None, eps=None) -> Tensor:
    """input / sqrt(mean(input^2 over the last dims) + eps), times weight; computed in float32
    for float16/bfloat16 and rounded back before weight, as torch; eps defaults to the dtype's eps."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    n = len(normalized_shape)
    if tuple(input.shape[input.dim() - n:]) != normalized_shape or n > input.dim():
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in normalized_shape)}], but got input of size"
                           f"{list(input.shape)}")
    x = input.float() if input.dtype in (kael.float16, kael.bfloat16) else input
    if eps is None:  # the compute dtype's (float32's for the half types), as torch
        eps = kael.finfo(x.dtype).eps
    dims = list(range(input.dim() - n, input.dim()))
    y = (x * kael.rsqrt((x * x).mean(dims, keepdim=True) + eps)).to(input.dtype)
    return y * weight if weight is not None else y


def group_norm(input: Tensor, num_groups: int, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Normalises each group of num_groups channels (dim 1) over its channels and the spatial
    dims (biased variance), then scales and shifts each channel."""
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.dim()}")
    n, c = input.shape[0], input.shape[1]
    if c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {list(input.shape)} and num_groups={num_groups}")
    x = input.reshape(n, num_groups, -1)
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, correction=0, keepdim=True)
    y = ((x - mean) * kael.rsqrt(var + eps)).reshape(input.shape)
    shape = [1, c] + [1] * (input.dim() - 2)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def batch_norm(input: Tensor, running_mean, running_var, weight=None, bias=None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalises each channel (dim 1) by the batch's statistics (training; the running ones are
    updated in place, the variance unbiased) or by the running statistics (eval)."""
    if input.dim() < 2:
        raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")
    c = input.shape[1]
    if training:
        count = input.numel() // c if c else 0
        if count == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{list(input.shape)}")
    elif running_mean is None or running_var is None:
        raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
    if input.numel() == 0:  # as torch: no statistics of an empty batch, the running ones untouched
        out = input.clone()
        if weight is not None and weight.numel():
            out = out * weight[0]
        if bias is not None and bias.numel():
            out = out + bias[0]
        return out
    return kael.native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)[0]


# ---------------------------------------------------------------- padding


def _pad_index(size, before, after, mode):
    """The source index of each position of a dim padded by (before, after) in mode."""
    out = []
    for j in range(-before, size + after):
        if mode == "replicate":
            i = min(max(j, 0), size - 1)
        elif mode == "circular":
            i = j % size
        else:  # reflect: mirror without repeating the edge
            period = 2 * (size - 1)
            k = j % period if period else 0
            i = k if k < size else period - k
        out.append(i)
    return out


def pad(input: Tensor, pad, mode: str = "constant", value=None) -> Tensor:
    """input padded on its last len(pad) // 2 dims, pad = (last_before, last_after,
    second_last_before, ...); negative amounts crop. Modes 'constant' (value, 0 by default),
    'reflect', 'replicate' and 'circular', as torch.nn.functional.pad."""
    pad = list(pad)
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.dim():
        raise RuntimeError("Padding length should be less than or equal to two times the input dimension but got "
                         f"padding length {len(pad)} and input of dimension {input.dim()}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if mode != "constant" and value not in (None, 0):
        raise ValueError(f"Padding mode \"{mode}\" doesn't take in value argument.")
    pairs = [(input.dim() - 1 - i, pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]
    if mode == "constant":
        out = input
        for d, before, after in pairs:  # crops first
            size = out.shape[d]
            lo, hi = max(-before, 0), max(-after, 0)
            if lo + hi > size:
                raise RuntimeError(f"The input size {size}, plus negative padding {-lo} and {-hi} resulted in a "
                                   f"negative output size, which is invalid. Check dimension {d} of your input.")
            out = out.narrow(d, lo, size - lo - hi)
        shape = list(out.shape)
        for d, before, after in pairs:
            shape[d] += max(before, 0) + max(after, 0)
        result = kael.full(shape, 0 if value is None else value, dtype=input.dtype, device=input.device)
        view = result
        for d, before, after in pairs:
            view = view.narrow(d, max(before, 0), out.shape[d])
        view.copy_(out)  # copy_ is differentiable: the gradient reaches input through it
        return result
    n = len(pad) // 2
    if input.dim() not in (n + 1, n + 2):
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {input.dim()}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    out = input
    for d, before, after in pairs:
        size = out.shape[d]
        if mode == "reflect" and (before >= size or after >= size):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, "
                               f"but got: padding ({before}, {after}) at dimension {d} of input {list(input.shape)}")
        if mode == "circular" and (before > size or after > size):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        index = kael.tensor(_pad_index(size, before, after, mode), dtype=kael.int64, device=input.device)
        out = kael.index_select(out, d, index)
    return out


# ---------------------------------------------------------------- distances


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """sum(x1 * x2) / (max(||x1||, eps) * max(||x2||, eps)) along dim (broadcasting)."""
    x1, x2 = kael.broadcast_tensors(x1, x2)
    n1 = kael.clamp_min(kael.norm(x1, 2, [dim], True), eps)
    n2 = kael.clamp_min(kael.norm(x2, 2, [dim], True), eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """||x1 - x2 + eps||_p over the last dim."""
    return kael.norm(x1 - x2 + eps, p, [-1], keepdim)


# ---------------------------------------------------------------- more losses


def _loss_args(size_average, reduce, reduction):
    """torch's _Reduction.legacy_get_string: when the deprecated size_average or reduce is given,
    the pair decides the reduction (absent ones count as True), with torch's UserWarning."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    reduction = "mean" if size_average and reduce else "sum" if reduce else "none"
    _warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{reduction}' instead.",
                   stacklevel=3)
    return reduction


def _weighted(losses, weight, reduction, mean_by_weight=True):
    """torch's element-weighted losses (mse, l1, huber): weight must have the input's size; 'mean'
    divides by the weights' sum (huber: by the element count)."""
    if tuple(weight.shape) != tuple(losses.shape):
        raise ValueError("Weights and input must have the same size.")
    losses = losses * weight
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    if reduction == "mean":
        return losses.sum() / weight.sum() if mean_by_weight else losses.mean()
    raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.")


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d^2 where |d| < delta, else delta * (|d| - delta / 2), d = input - target."""
    _check_same_size("huber_loss", input, target)
    input, target = kael.broadcast_tensors(input, target)
    d = (input - target).abs()
    losses = _where_branch(kael.logical_not(d >= delta), d, lambda s: s * s * 0.5, (d - delta * 0.5) * delta)
    if weight is not None:
        return _weighted(losses, weight, reduction, mean_by_weight=False)
    _check_reduction(reduction)
    return _reduce(losses, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - beta / 2 (l1 when beta is 0)."""
    reduction = _loss_args(size_average, reduce, reduction)
    _check_reduction(reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    _check_same_size("smooth_l1_loss", input, target)
    input, target = kael.broadcast_tensors(input, target)
    d = (input - target).abs()
    if beta == 0:
        return _reduce(d, reduction)
    return _reduce(_where_branch(kael.logical_not(d >= beta), d, lambda s: s * s * (0.5 / beta), d - 0.5 * beta), reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """target * (log(target) - input) (input holds log-probabilities; target too with log_target),
    reduced; 'batchmean' divides the sum by the batch size."""
    reduction = _loss_args(size_average, reduce, reduction)
    if reduction == "mean":
        _warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                       "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                       "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                       stacklevel=2)
    if log_target:
        losses = kael.exp(target) * (target - input)
    else:
        losses = kael.xlogy(target, target) - target * input
    if reduction == "batchmean":
        return losses.sum() / input.shape[0] if input.dim() else losses.sum()
    _check_reduction(reduction)
    return _reduce(losses, reduction)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-(t log(x) + (1 - t) log(1 - x)) for probabilities x, the logs clamped at -100."""
    reduction = _loss_args(size_average, reduce, reduction)
    _check_reduction(reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({list(target.shape)}) that is different to the input size "
                         f"({list(input.shape)}) is deprecated. Please ensure they have the same size.")
    if input.numel() and bool(kael.logical_or(input < 0, input > 1).any().item()):
        raise RuntimeError("all elements of input should be between 0 and 1")
    # The gradient is torch's (x - t) / max(x (1 - x), 1e-12), finite at x = 0 and 1 (sigmoid(20.)
    # is 1.0 in float32): the clamped logs are read at the detached input (they give the target's
    # gradient), and a term worth 0 gives the input's.
    x = input.detach()
    log_x = kael.clamp_min(kael.log(x), -100)
    log_1mx = kael.clamp_min(kael.log(1 - x), -100)
    losses = -(target * log_x + (1 - target) * log_1mx)
    if input.requires_grad:
        losses = losses + (input - x) * ((input - target) / kael.clamp_min((1 - input) * input, 1e-12))
    if weight is not None:
        losses = losses * weight
    return _reduce(losses, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input)), reduced."""
    reduction = _loss_args(size_average, reduce, reduction)
    _check_reduction(reduction)
    return _reduce(kael.log1p(kael.exp(-target * input)), reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -target * (input1 - input2) + margin), reduced."""
    reduction = _loss_args(size_average, reduce, reduction)
    _check_reduction(reduction)
    return _reduce(kael.clamp_min(-target * (input1 - input2) + margin, 0), reduction)


from kael.nn._pooling import *  # noqa: E402,F401,F403  (pooling, interpolate, fold/unfold, dropout1d/2d)
from kael.nn._conv import *  # noqa: E402,F401,F403  (conv1d, conv2d, conv_transpose1d, conv_transpose2d)
