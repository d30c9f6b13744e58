"""kael.amp.GradScaler: dynamic loss scaling for mixed-precision training, with torch.amp.GradScaler's
algorithm and API.

Each iteration: scale(loss) multiplies the loss by the scale S (a float32 0-dim tensor, created on
the loss's device at the first call); backward then yields gradients S times too large.
unscale_(optimizer) multiplies every gradient by 1/S (rounded to float32 from the double
reciprocal) and records in found_inf whether any gradient held an inf or NaN *before* unscaling;
step(optimizer) unscales if that was not done and calls optimizer.step() only where nothing was
found; update() then multiplies S by backoff_factor if any step was skipped (and restarts the
count of good steps), else counts the good step and, on the growth_interval-th in a row,
multiplies S by growth_factor unless the product overflows float32. The products are taken in
double and rounded to float32, as torch's kernels compute them.

A scaler for device "cuda" where kael has no CUDA backend warns and disables itself, as torch's
does; a disabled scaler returns outputs unchanged, steps the optimizer plainly and reports a scale
of 1.0 and an empty state_dict.
"""
from __future__ import annotations

import warnings
from collections import abc, defaultdict
from enum import Enum
from typing import Any

__all__ = ["GradScaler", "OptState"]


class OptState(Enum):
    """Where an optimizer is in the current iteration."""
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state() -> dict:
    return {"stage": OptState.READY, "found_inf_per_device": {}}


def _float32_finite(value: float) -> bool:
    import kael

    return bool(kael.tensor(value, dtype=kael.float32).isfinite().item())


class GradScaler:
    """Scales losses and unscales gradients so float16 gradients neither underflow nor, for long,
    overflow. See the module docstring for the algorithm."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True) -> None:
        self._device = device
        self._enabled = enabled
        if device == "cuda" and enabled:
            from kael.cuda.amp.common import amp_definitely_not_available

            if amp_definitely_not_available():
                warnings.warn("kael.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                              stacklevel=2)
                self._enabled = False
        if not self._enabled:
            return
        if growth_factor <= 1.0:
            raise AssertionError("The growth factor must be > 1.0.")
        if backoff_factor >= 1.0:
            raise AssertionError("The backoff factor must be < 1.0.")
        self._init_scale = init_scale
        self._scale = None
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._init_growth_tracker = 0
        self._growth_tracker = None
        self._per_optimizer_states: dict[int, dict[str, Any]] = defaultdict(_fresh_state)

    # ------------------------------------------------------------ state tensors

    def _check_scale_growth_tracker(self, funcname: str):
        fix = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + fix)
        if self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _growth_tracker is None.  " + fix)
        return self._scale, self._growth_tracker

    def _lazy_init_scale_growth_tracker(self, dev) -> None:
        import kael

        self._scale = kael.full((), self._init_scale, dtype=kael.float32, device=dev)
        self._growth_tracker = kael.full((), self._init_growth_tracker, dtype=kael.int32, device=dev)

    def _scale_on(self, dev):
        if self._scale is None:
            self._lazy_init_scale_growth_tracker(dev)
        return self._scale.to(device=dev)

    # ------------------------------------------------------------ the iteration

    def scale(self, outputs):
        """outputs (a tensor, or nested lists/tuples/iterables of tensors) multiplied by the
        scale; unchanged when disabled."""
        import kael

        if not self._enabled:
            return outputs
        if isinstance(outputs, kael.Tensor):
            return outputs * self._scale_on(outputs.device)

        def apply(value):
            if isinstance(value, kael.Tensor):
                return value * self._scale_on(value.device)
            if isinstance(value, abc.Iterable):
                scaled = map(apply, value)
                return type(value)(scaled) if isinstance(value, (list, tuple)) else scaled
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply(outputs)

    def _unscale_grads_(self, optimizer, inv_scale: float, allow_fp16: bool) -> dict:
        """Checks every gradient of the optimizer for infs and NaNs, then multiplies it by
        inv_scale (a float32 value); returns {device: found_inf}, found_inf a float32 0-dim
        tensor 1.0 where a non-finite gradient was found on that device, else 0.0."""
        import kael

        found: dict = {}
        factors: dict = {}
        with kael.no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if not isinstance(param, kael.Tensor):
                        raise AssertionError(f"expected param to be kael.Tensor, got {type(param).__name__}")
                    grad = param.grad
                    if grad is None:
                        continue
                    if not allow_fp16 and grad.dtype == kael.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    flag = found.get(grad.device)
                    if flag is None:
                        flag = found[grad.device] = kael.zeros((), dtype=kael.float32, device=grad.device)
                    if not bool(grad.isfinite().all().item()):
                        flag.fill_(1.0)
                    if inv_scale != 1.0:
                        factor = factors.get(grad.device)
                        if factor is None:
                            factor = factors[grad.device] = kael.full((), inv_scale, dtype=kael.float32,
                                                                      device=grad.device)
                        grad.mul_(factor)
        return found

    def unscale_(self, optimizer) -> None:
        """Divides the optimizer's gradients by the scale (once per iteration), recording whether
        any was inf or NaN; a no-op when disabled."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        import kael

        # 1/S in double, rounded to float32 (torch: scale.double().reciprocal().float())
        inv_scale = kael.tensor(1.0 / float(self._scale.item()), dtype=kael.float32).item()
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, False)
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args: Any, **kwargs: Any):
        """Unscales (unless unscale_ was called) and calls optimizer.step(*args, **kwargs) if no
        gradient was inf or NaN; returns what optimizer.step returned, or None when skipped."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if len(state["found_inf_per_device"]) == 0:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        result = None
        if not sum(float(v.item()) for v in state["found_inf_per_device"].values()):
            result = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return result

    def update(self, new_scale=None) -> None:
        """Backs the scale off if any optimizer's step was skipped this iteration, else counts a
        good step and grows the scale after growth_interval of them in a row; with new_scale,
        sets the scale to it instead. Starts the next iteration."""
        import kael

        if not self._enabled:
            return
        scale, tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                scale.fill_(new_scale)
            else:
                reason = ("new_scale should be a float or a 1-element kael.cuda.FloatTensor or "
                          "kael.FloatTensor with requires_grad=False.")
                if not isinstance(new_scale, kael.Tensor) or new_scale.device.type != self._device:
                    raise AssertionError(reason)
                if new_scale.numel() != 1 or new_scale.requires_grad:
                    raise AssertionError(reason)
                scale.copy_(new_scale.reshape(()))
        else:
            found = [f for s in self._per_optimizer_states.values() for f in s["found_inf_per_device"].values()]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            if sum(float(f.item()) for f in found):
                scale.fill_(float(scale.item()) * self._backoff_factor)
                tracker.fill_(0)
            else:
                good = int(tracker.item()) + 1
                if good == self._growth_interval:
                    grown = float(scale.item()) * self._growth_factor
                    if _float32_finite(grown):
                        scale.fill_(grown)
                    tracker.fill_(0)
                else:
                    tracker.fill_(good)
        self._per_optimizer_states = defaultdict(_fresh_state)

    # ------------------------------------------------------------ settings and state

    def _get_scale_async(self):
        return self._scale

    def get_scale(self) -> float:
        """The current scale as a Python float (init_scale before the first scale(); 1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else int(self._growth_tracker.item())

    def is_enabled(self) -> bool:
        """Whether this scaler scales (False when disabled, or for "cuda" without CUDA)."""
        return self._enabled

    def state_dict(self) -> dict:
        """scale, growth_factor, backoff_factor, growth_interval and _growth_tracker; {} when disabled."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restores what state_dict() returned; a no-op when disabled."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        if self._enabled:
            if len(self._per_optimizer_states) != 0:
                raise AssertionError("A GradScaler instance may only be pickled at the beginning "
                                     "of an iteration, or at the end after scaler.update().")
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
            state["_per_optimizer_states"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self._enabled:
            self._per_optimizer_states = defaultdict(_fresh_state)
