"""Gradient clipping, in place on the .grad of each parameter."""
import math

import kael
from kael.nn._grad import no_grad


def _grads(parameters):
    if isinstance(parameters, kael.Tensor):
        parameters = [parameters]
    return [g for g in (getattr(p, "grad", None) for p in parameters) if g is not None]


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=True, foreach=None):
    """Scales the gradients so that their total norm (the norm of the per-gradient norms) is at
    most max_norm, and returns the total norm before clipping.

    A NaN or infinite total norm raises ValueError (unless error_if_nonfinite=False, when the
    gradients are scaled as PyTorch scales them) before any gradient is touched.
    """
    grads = _grads(parameters)
    max_norm = float(max_norm)
    norm_type = float(norm_type)
    if not grads:
        return kael.tensor(0.0)
    with no_grad():
        if norm_type == math.inf:
            norms = [g.abs().max() for g in grads]
            total_norm = norms[0] if len(norms) == 1 else kael.stack(norms).max()
        else:
            norms = [g.norm(norm_type) for g in grads]
            total_norm = kael.stack(norms).norm(norm_type)
        if error_if_nonfinite and not bool(kael.isfinite(total_norm).item()):
            raise ValueError(f"clip_grad_norm_: the total norm of order {norm_type} for gradients from "
                             f"`parameters` is non-finite ({total_norm.item()}), so it cannot be clipped. To disable "
                             "this error and scale the gradients by the non-finite norm anyway, set "
                             "`error_if_nonfinite=False`")
        clip_coef = max_norm / (total_norm + 1e-6)
        clip_coef_clamped = clip_coef.clamp(max=1.0)
        for g in grads:
            g.mul_(clip_coef_clamped.to(dtype=g.dtype))
    return total_norm


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps every gradient element into [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(-clip_value, clip_value)
