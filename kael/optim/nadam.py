"""NAdam and RAdam."""
import kael
from kael.optim.adam import _check
from kael.optim.optimizer import Optimizer, _how_to_run, _update_under_no_grad


def _decay(param, grad, lr, weight_decay, decoupled):
    """The weight decay of NAdam and RAdam: p *= 1 - lr wd (decoupled), else g + wd p."""
    if weight_decay == 0:
        return grad
    if decoupled:
        param.mul_(1 - lr * weight_decay)
        return grad
    return grad.add(param, alpha=weight_decay)


def _moments(param):
    return {"exp_avg": kael.zeros_like(param), "exp_avg_sq": kael.zeros_like(param)}


def _nadam_state(param):
    # mu_product in float32, as torch keeps it (its steps read the rounded product)
    return {"mu_product": kael.ones((), dtype=kael.float32), **_moments(param)}


class NAdam(Optimizer):
    """PyTorch's NAdam (Adam with Nesterov momentum and the momentum schedule
    mu_t = beta1 (1 - 0.96^(t momentum_decay) / 2)); mu_product, the product of the mu_t, is kept
    in float32 as torch keeps it, so the steps agree to the bit."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check(lr, eps, betas, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        **_how_to_run("NAdam", foreach, differentiable, capturable=capturable))
        super().__init__(params, defaults)

    @_update_under_no_grad
    def step(self):
        for group in self.param_groups:
            lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
            momentum_decay = group["momentum_decay"]
            for param, grad, state in self._each_param(group, _nadam_state):
                step = state["step"]
                bias_correction2 = 1 - beta2 ** step
                grad = _decay(param, grad, lr, group["weight_decay"], group["decoupled_weight_decay"])
                mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
                mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
                mu_product = state["mu_product"]
                mu_product.mul_(mu)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denom = exp_avg_sq.div(bias_correction2).sqrt()
                product = mu_product.item()
                mu_product_next = product * mu_next
                denom.add_(eps)
                param.addcdiv_(grad, denom, value=-lr * (1.0 - mu) / (1.0 - product))
                param.addcdiv_(exp_avg, denom, value=(-lr * mu_next) / (1.0 - mu_product_next))


class RAdam(Optimizer):
    """PyTorch's RAdam (rectified Adam): Adam's step scaled by the variance rectification term
    while the approximated SMA length rho_t exceeds 5, the bias-corrected momentum alone before."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False):
        _check(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        decoupled_weight_decay=decoupled_weight_decay,
                        **_how_to_run("RAdam", foreach, differentiable, capturable=capturable))
        super().__init__(params, defaults)

    @_update_under_no_grad
    def step(self):
        for group in self.param_groups:
            lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
            for param, grad, state in self._each_param(group, _moments):
                step = state["step"]
                grad = _decay(param, grad, lr, group["weight_decay"], group["decoupled_weight_decay"])
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                bias_correction1 = 1 - beta1 ** step
                bias_correction2 = 1 - beta2 ** step
                bias_corrected_exp_avg = exp_avg / bias_correction1
                rho_inf = 2 / (1 - beta2) - 1
                rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
                if rho_t > 5.0:
                    rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                    adaptive_lr = (bias_correction2 ** 0.5) / exp_avg_sq.sqrt().add_(eps)
                    param.add_(bias_corrected_exp_avg * lr * adaptive_lr * rect, alpha=-1.0)
                else:
                    param.add_(bias_corrected_exp_avg * lr, alpha=-1.0)
