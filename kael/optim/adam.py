"""Adam and AdamW (decoupled weight decay)."""
import math

import kael
from kael.optim.optimizer import Optimizer, _how_to_run, _update_under_no_grad


def _check(lr, eps, betas, weight_decay):
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


class Adam(Optimizer):
    """PyTorch's Adam: g = grad + weight_decay * p; m = beta1 * m + (1 - beta1) * g;
    v = beta2 * v + (1 - beta2) * g^2; p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
    (with amsgrad, the running maximum of v)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        _check(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, decoupled_weight_decay=decoupled_weight_decay,
                        **_how_to_run(type(self).__name__, foreach, differentiable, capturable=capturable, fused=fused))
        super().__init__(params, defaults)

    @_update_under_no_grad
    def step(self):
        for group in self.param_groups:
            amsgrad = group["amsgrad"]
            # parameters with a gradient, by step count (all share one unless some were skipped)
            by_step = {}
            for param in group["params"]:
                grad = getattr(param, "grad", None)
                if grad is None:
                    continue
                state = self._state_of(param)
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = kael.zeros_like(param)
                    state["exp_avg_sq"] = kael.zeros_like(param)
                    if amsgrad:
                        state["max_exp_avg_sq"] = kael.zeros_like(param)
                state["step"] += 1
                by_step.setdefault(state["step"], []).append((param, grad, state))
            for step, items in by_step.items():
                if not self._fused_update(group, step, items):
                    for param, grad, state in items:
                        self._update(group, step, param, grad, state)

    def _fused_update(self, group, step, items):
        """One kael._C._adam_step_ over the parameters of one step count: the same update as _update's
        ops in one pass; False (nothing written) where the lists do not qualify
        (kael._C._adam_step_supported: contiguous float32 or float64 CPU tensors, no memory shared)."""
        (beta1, beta2), amsgrad = group["betas"], group["amsgrad"]
        params = [p for p, _, _ in items]
        if params[0].device.type != "cpu":  # the fused step is a CPU kernel
            return False
        grads = [g for _, g, _ in items]
        exp_avgs = [s["exp_avg"] for _, _, s in items]
        exp_avg_sqs = [s["exp_avg_sq"] for _, _, s in items]
        maxes = [s["max_exp_avg_sq"] for _, _, s in items] if amsgrad else []
        if not kael._C._adam_step_supported(params, grads, exp_avgs, exp_avg_sqs, maxes, amsgrad):
            return False
        kael._C._adam_step_(params, grads, exp_avgs, exp_avg_sqs, maxes, lr=float(group["lr"]), beta1=float(beta1),
                         beta2=float(beta2), weight_decay=float(group["weight_decay"]), eps=float(group["eps"]),
                         amsgrad=amsgrad, maximize=bool(group["maximize"]),
                         decoupled=bool(group["decoupled_weight_decay"]), step=step)
        return True

    def _update(self, group, step, param, grad, state):
        """One parameter's step with tensor ops (any dtype, layout or device)."""
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        weight_decay, amsgrad, maximize = group["weight_decay"], group["amsgrad"], group["maximize"]
        if maximize:
            grad = -grad
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        if weight_decay != 0:
            if group["decoupled_weight_decay"]:
                param.mul_(1 - lr * weight_decay)
            else:
                grad = grad.add(param, alpha=weight_decay)
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).add_(grad * grad, alpha=1 - beta2)
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        step_size = lr / bias_correction1
        bias_correction2_sqrt = math.sqrt(bias_correction2)
        if amsgrad:
            max_exp_avg_sq = state["max_exp_avg_sq"]
            kael.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
            denom = (max_exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        else:
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        param.sub_(exp_avg / denom, alpha=step_size)


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr * weight_decay before the Adam step (the
    gradient is not changed); weight_decay defaults to 0.01."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
