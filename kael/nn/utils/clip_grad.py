"""Gradient clipping, in place on the .grad of each parameter."""
import math
import warnings

import kael
from kael.nn._grad import no_grad


def _grads(parameters):
    if isinstance(parameters, kael.Tensor):
        parameters = [parameters]
    return [g for g in (getattr(p, "grad", None) for p in parameters) if g is not None]


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of the tensors' norms (of order norm_type), as one tensor: of gradients, say
    `get_total_norm([p.grad for p in params if p.grad is not None])`, then
    `clip_grads_with_norm_(params, max_norm, total)` scales them.

    A NaN or infinite total raises RuntimeError when error_if_nonfinite=True (default False, as torch).
    """
    if isinstance(tensors, kael.Tensor):
        tensors = [tensors]
    tensors = list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return kael.tensor(0.0)
    with no_grad():
        if norm_type == math.inf:
            norms = [t.abs().max() for t in tensors]
            total_norm = norms[0] if len(norms) == 1 else kael.stack(norms).max()
        else:
            norms = [t.norm(norm_type) for t in tensors]
            total_norm = kael.stack(norms).norm(norm_type)
        if error_if_nonfinite and not bool(kael.isfinite(total_norm).item()):
            raise RuntimeError(f"get_total_norm: the total norm of order {norm_type} for gradients from "
                             f"`parameters` is non-finite ({total_norm.item()}), so it cannot be clipped. To disable "
                             "this error and scale the gradients by the non-finite norm anyway, set "
                             "`error_if_nonfinite=False`")
    return total_norm


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scales the parameters' gradients by min(1, max_norm / (total_norm + 1e-6)), total_norm a
    tensor (get_total_norm's) or a number."""
    grads = _grads(parameters)
    max_norm = float(max_norm)
    if not grads:
        return
    with no_grad():
        if not isinstance(total_norm, kael.Tensor):
            total_norm = kael.tensor(float(total_norm))
        clip_coef_clamped = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(clip_coef_clamped.to(dtype=g.dtype))


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scales the gradients so that their total norm (the norm of the per-gradient norms) is at
    most max_norm, and returns the total norm before clipping.

    With error_if_nonfinite=True a NaN or infinite total norm raises RuntimeError before any
    gradient is touched; by default (False, as torch) the gradients are scaled by it as torch
    scales them.
    """
    if isinstance(parameters, kael.Tensor):
        parameters = [parameters]
    parameters = list(parameters)  # walked twice: a generator would be spent by the first walk
    grads = _grads(parameters)
    if not grads:
        return kael.tensor(0.0)
    try:
        total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    except RuntimeError as e:
        raise RuntimeError("clip_grad_norm_" + str(e)[len("get_total_norm"):]) from None
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated (as in torch, with a FutureWarning): clip_grad_norm_."""
    warnings.warn("`kael.nn.utils.clip_grad_norm` is now deprecated in favor of `kael.nn.utils.clip_grad_norm_`.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps every gradient element into [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(-clip_value, clip_value)
