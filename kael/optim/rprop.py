"""Rprop and ASGD."""
import kael
from kael.optim.optimizer import Optimizer, _how_to_run, _update_under_no_grad


class Rprop(Optimizer):
    """PyTorch's Rprop (resilient backpropagation): each element's step size grows by etas[1] while
    its gradient keeps its sign and shrinks by etas[0] when the sign flips (that element then
    skips the step), within step_sizes; p -= sign(g) * step size."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, maximize=maximize,
                        **_how_to_run("Rprop", foreach, differentiable, capturable=capturable))
        super().__init__(params, defaults)

    @_update_under_no_grad
    def step(self):
        for group in self.param_groups:
            etaminus, etaplus = group["etas"]
            step_size_min, step_size_max = group["step_sizes"]

            def init(p, group=group):
                return {"prev": kael.zeros_like(p), "step_size": kael.full_like(p, group["lr"])}

            for param, grad, state in self._each_param(group, init):
                prev, step_size = state["prev"], state["step_size"]
                sign = grad.mul(prev).sign()
                sign.masked_fill_(sign.gt(0), etaplus)
                sign.masked_fill_(sign.lt(0), etaminus)
                sign.masked_fill_(sign.eq(0), 1)
                step_size.mul_(sign).clamp_(step_size_min, step_size_max)
                grad = grad.clone()
                grad.masked_fill_(sign.eq(etaminus), 0)  # a flipped sign: no step this time
                param.addcmul_(grad.sign(), step_size, value=-1)
                prev.copy_(grad)


class ASGD(Optimizer):
    """PyTorch's ASGD (averaged SGD): p = p (1 - lambd eta) - eta g, ax the running average of p
    from step t0 on; eta = lr / (1 + lambd lr t)^alpha and mu = 1 / max(1, t - t0) are float32
    0-d tensors, as torch keeps them."""

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None, maximize=False,
                 differentiable=False, capturable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay, maximize=maximize,
                        **_how_to_run("ASGD", foreach, differentiable, capturable=capturable))
        super().__init__(params, defaults)

    @_update_under_no_grad
    def step(self):
        for group in self.param_groups:
            lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]

            def init(p, lr=lr):
                return {"eta": kael.tensor(lr, dtype=kael.float32), "mu": kael.ones((), dtype=kael.float32),
                        "ax": kael.zeros_like(p)}

            for param, grad, state in self._each_param(group, init):
                step = state["step"]
                if group["weight_decay"] != 0:
                    grad = grad.add(param, alpha=group["weight_decay"])
                eta, mu, ax = state["eta"], state["mu"], state["ax"]
                eta_value = eta.item()
                param.mul_(1 - lambd * eta_value)
                param.add_(grad, alpha=-eta_value)
                if mu.item() != 1:
                    ax.add_(param.sub(ax).mul_(mu))
                else:
                    ax.copy_(param)
                eta.fill_(lr / ((1 + lambd * lr * step) ** alpha))
                mu.fill_(1 / max(1, step - t0))
