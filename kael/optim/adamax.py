"""Adamax."""
import kael
from kael.optim.adam import _check
from kael.optim.optimizer import Optimizer, _how_to_run, _update_under_no_grad


def _moments(param):
    return {"exp_avg": kael.zeros_like(param), "exp_inf": kael.zeros_like(param)}


class Adamax(Optimizer):
    """PyTorch's Adamax (Adam with the infinity norm): m = lerp(m, g, 1 - beta1);
    u = max(beta2 u, |g| + eps); p -= lr / (1 - beta1^t) * m / u."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        _check(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        **_how_to_run("Adamax", foreach, differentiable, capturable=capturable))
        super().__init__(params, defaults)

    @_update_under_no_grad
    def step(self):
        for group in self.param_groups:
            lr, (beta1, beta2), eps, weight_decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for param, grad, state in self._each_param(group, _moments):
                if weight_decay != 0:
                    grad = grad.add(param, alpha=weight_decay)
                exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
                exp_avg.lerp_(grad, 1 - beta1)
                kael.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps), out=exp_inf)
                clr = lr / (1 - beta1 ** state["step"])
                param.addcdiv_(exp_avg, exp_inf, value=-clr)
