"""Adadelta."""
import kael
from kael.optim.optimizer import Optimizer, _how_to_run, _update_under_no_grad


def _averages(param):
    return {"square_avg": kael.zeros_like(param), "acc_delta": kael.zeros_like(param)}


class Adadelta(Optimizer):
    """PyTorch's Adadelta: v = rho v + (1 - rho) g^2; delta = sqrt(u + eps) / sqrt(v + eps) * g;
    u = rho u + (1 - rho) delta^2; p -= lr * delta."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        **_how_to_run("Adadelta", foreach, differentiable, capturable=capturable))
        super().__init__(params, defaults)

    @_update_under_no_grad
    def step(self):
        for group in self.param_groups:
            lr, rho, eps, weight_decay = group["lr"], group["rho"], group["eps"], group["weight_decay"]
            for param, grad, state in self._each_param(group, _averages):
                if weight_decay != 0:
                    grad = grad.add(param, alpha=weight_decay)
                square_avg, acc_delta = state["square_avg"], state["acc_delta"]
                square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
                std = square_avg.add(eps).sqrt_()
                delta = acc_delta.add(eps).sqrt_()
                delta.div_(std).mul_(grad)
                acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
                param.add_(delta, alpha=-lr)
