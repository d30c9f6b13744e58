"""Learning-rate schedulers: PyTorch's recursive (chainable) updates, so the sequences of learning
rates are PyTorch's to the last bit; WarmupCosineLR is kael's own (linear warmup, then cosine)."""
import math
import types
from collections import Counter

from kael.optim.optimizer import Optimizer

__all__ = ["LRScheduler", "LambdaLR", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR",
           "WarmupCosineLR"]


class LRScheduler:
    """Base class: the constructor records each group's initial_lr and takes the first step
    (last_epoch becomes 0); step() advances last_epoch and writes get_lr() into the groups."""

    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] when resuming an "
                                   "optimizer")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self):
        raise NotImplementedError

    def get_last_lr(self):
        """The learning rates of the groups after the last step()."""
        return self._last_lr

    def step(self):
        self._step_count += 1
        self.last_epoch += 1
        values = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _group_lrs(self):
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self):
        """Every attribute but the optimizer."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


class LambdaLR(LRScheduler):
    """lr = initial_lr * lr_lambda(epoch), one function for every group or one per group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        if not isinstance(lr_lambda, (list, tuple)):
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        else:
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base_lr * lmbda(self.last_epoch) for lmbda, base_lr in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self):
        """As LRScheduler's, with the lambdas left out unless they are callable objects (their
        __dict__ is saved then)."""
        state = {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None] * len(self.lr_lambdas)
        for i, fn in enumerate(self.lr_lambdas):
            if not isinstance(fn, types.FunctionType):
                state["lr_lambdas"][i] = fn.__dict__.copy()
        return state

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        lr_lambdas = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for i, fn in enumerate(lr_lambdas):
            if fn is not None:
                self.lr_lambdas[i].__dict__.update(fn)


class StepLR(LRScheduler):
    """Multiplies the learning rate by gamma every step_size epochs."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._group_lrs()
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]


class MultiStepLR(LRScheduler):
    """Multiplies the learning rate by gamma at each milestone epoch (by gamma^k for a milestone
    given k times)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return self._group_lrs()
        return [group["lr"] * self.gamma ** self.milestones[self.last_epoch] for group in self.optimizer.param_groups]


class ExponentialLR(LRScheduler):
    """Multiplies the learning rate by gamma every epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return self._group_lrs()
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]


class CosineAnnealingLR(LRScheduler):
    """eta_min + (initial_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, computed recursively
    as PyTorch does (and continuing as a cosine with period 2 * T_max past T_max)."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return self._group_lrs()
        if self._step_count == 1 and self.last_epoch > 0:
            return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(self.last_epoch * math.pi / self.T_max)) / 2
                    for base_lr in self.base_lrs]
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [group["lr"] + (base_lr - self.eta_min) * (1 - math.cos(math.pi / self.T_max)) / 2
                    for base_lr, group in zip(self.base_lrs, self.optimizer.param_groups)]
        return [(1 + math.cos(math.pi * self.last_epoch / self.T_max))
                / (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max))
                * (group["lr"] - self.eta_min) + self.eta_min
                for group in self.optimizer.param_groups]


class LinearLR(LRScheduler):
    """Scales the learning rate by a factor going linearly from start_factor to end_factor over
    total_iters epochs."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._group_lrs()
        return [group["lr"] * (1.0 + (self.end_factor - self.start_factor)
                               / (self.total_iters * self.start_factor
                                  + (self.last_epoch - 1) * (self.end_factor - self.start_factor)))
                for group in self.optimizer.param_groups]


class WarmupCosineLR(LRScheduler):
    """Linear warmup, then cosine decay: for epoch e < warmup_steps the learning rate is
    initial_lr * (e + 1) / warmup_steps; after it, eta_min + (initial_lr - eta_min) * (1 + cos(pi * p)) / 2
    with p = (e - warmup_steps) / (total_steps - warmup_steps), held at eta_min once p >= 1."""

    def __init__(self, optimizer, warmup_steps, total_steps, eta_min=0.0, last_epoch=-1):
        if warmup_steps < 0:
            raise ValueError(f"WarmupCosineLR: warmup_steps must be at least 0, got {warmup_steps}")
        if total_steps <= warmup_steps:
            raise ValueError(f"WarmupCosineLR: total_steps ({total_steps}) must be greater than warmup_steps "
                             f"({warmup_steps})")
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def factor(self, epoch, base_lr):
        """The learning rate at epoch for a group whose initial_lr is base_lr."""
        if epoch < self.warmup_steps:
            return base_lr * (epoch + 1) / self.warmup_steps
        progress = min(1.0, (epoch - self.warmup_steps) / (self.total_steps - self.warmup_steps))
        return self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * progress)) / 2

    def get_lr(self):
        return [self.factor(self.last_epoch, base_lr) for base_lr in self.base_lrs]
