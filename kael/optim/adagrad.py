"""Adagrad."""
import kael
from kael.optim.optimizer import Optimizer, _how_to_run, _update_under_no_grad


class Adagrad(Optimizer):
    """PyTorch's Adagrad: g = grad + weight_decay * p; sum += g^2; p -= clr * g / (sqrt(sum) + eps)
    with clr = lr / (1 + (t - 1) * lr_decay). The state (sum = initial_accumulator_value) is made
    for every parameter when the optimizer is, as torch makes it."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, maximize=maximize,
                        **_how_to_run("Adagrad", foreach, differentiable, fused=fused))
        super().__init__(params, defaults)
        for group in self.param_groups:
            for param in group["params"]:
                state = self._state_of(param)
                state["step"] = 0
                state["sum"] = kael.full_like(param, group["initial_accumulator_value"])

    @_update_under_no_grad
    def step(self):
        for group in self.param_groups:
            lr, lr_decay, eps, weight_decay = group["lr"], group["lr_decay"], group["eps"], group["weight_decay"]

            # (a parameter added with add_param_group after the constructor begins its state here)
            def init(p, group=group):
                return {"sum": kael.full_like(p, group["initial_accumulator_value"])}

            for param, grad, state in self._each_param(group, init):
                if weight_decay != 0:
                    grad = grad.add(param, alpha=weight_decay)
                clr = lr / (1 + (state["step"] - 1) * lr_decay)
                state_sum = state["sum"]
                state_sum.addcmul_(grad, grad, value=1)
                std = state_sum.sqrt().add_(eps)
                param.addcdiv_(grad, std, value=-clr)
