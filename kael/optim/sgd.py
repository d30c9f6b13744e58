"""Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay."""
from kael.optim.optimizer import Optimizer, _how_to_run, _update_under_no_grad


class SGD(Optimizer):
    """PyTorch's SGD: g = grad + weight_decay * p; with momentum, buf = momentum * buf +
    (1 - dampening) * g (buf = g at the first step) and g = g + momentum * buf (nesterov) or buf;
    p -= lr * g."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov,
                        maximize=maximize, **_how_to_run("SGD", foreach, differentiable, fused=fused))
        super().__init__(params, defaults)

    @_update_under_no_grad
    def step(self):
        for group in self.param_groups:
            lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
            weight_decay, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
            for param in group["params"]:
                grad = getattr(param, "grad", None)
                if grad is None:
                    continue
                if maximize:
                    grad = -grad
                if weight_decay != 0:
                    grad = grad.add(param, alpha=weight_decay)
                if momentum != 0:
                    state = self._state_of(param)
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = grad.clone()
                        state["momentum_buffer"] = buf
                    else:
                        buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                    grad = grad.add(buf, alpha=momentum) if nesterov else buf
                param.add_(grad, alpha=-lr)
