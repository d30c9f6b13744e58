"""RMSprop (optionally centered, with momentum)."""
import kael
from kael.optim.optimizer import Optimizer, _how_to_run, _update_under_no_grad


class RMSprop(Optimizer):
    """PyTorch's RMSprop: v = alpha * v + (1 - alpha) * g^2; avg = sqrt(v) (centered: sqrt(v - mean_g^2))
    + eps; p -= lr * g / avg, or through a momentum buffer b = momentum * b + g / avg."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum, centered=centered,
                        maximize=maximize, **_how_to_run("RMSprop", foreach, differentiable, capturable=capturable))
        super().__init__(params, defaults)

    @_update_under_no_grad
    def step(self):
        for group in self.param_groups:
            lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
            weight_decay, momentum, centered = group["weight_decay"], group["momentum"], group["centered"]
            def init(p, momentum=momentum, centered=centered):
                state = {"square_avg": kael.zeros_like(p)}
                if momentum > 0:
                    state["momentum_buffer"] = kael.zeros_like(p)
                if centered:
                    state["grad_avg"] = kael.zeros_like(p)
                return state

            for param, grad, state in self._each_param(group, init):
                if weight_decay != 0:
                    grad = grad.add(param, alpha=weight_decay)
                square_avg = state["square_avg"]
                square_avg.mul_(alpha).add_(grad * grad, alpha=1 - alpha)
                if centered:
                    grad_avg = state["grad_avg"]
                    grad_avg.mul_(alpha).add_(grad, alpha=1 - alpha)
                    avg = (square_avg - grad_avg * grad_avg).sqrt_()
                else:
                    avg = square_avg.sqrt()
                avg.add_(eps)
                if momentum > 0:
                    buf = state["momentum_buffer"]
                    buf.mul_(momentum).add_(grad / avg)
                    param.add_(buf, alpha=-lr)
                else:
                    param.sub_(grad / avg, alpha=lr)
