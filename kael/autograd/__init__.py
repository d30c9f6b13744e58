"""kael.autograd: reverse-mode automatic differentiation (torch.autograd's API).

The graph is recorded and differentiated in C++ (kael/autograd/autograd.h); this package holds
the Python surface: backward() and grad(), custom Functions, gradcheck, grad mode and anomaly
detection, and text/DOT views of a graph.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from kael import _C
from kael._C import Tensor
from kael.autograd.function import Function, FunctionCtx
from kael.autograd.gradcheck import gradcheck
from kael.autograd.variable import Variable
from kael.autograd.grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,
                                     no_grad, set_grad_enabled, set_multithreading_enabled)

__all__ = ["backward", "grad", "Variable", "Function", "FunctionCtx", "gradcheck", "no_grad", "enable_grad", "set_grad_enabled",
           "inference_mode", "set_multithreading_enabled", "is_grad_enabled", "is_inference_mode_enabled", "set_detect_anomaly",
           "detect_anomaly", "is_anomaly_enabled", "explain", "autograd_graph", "graphviz"]


def backward(tensors: Tensor | Sequence[Tensor], grad_tensors: Tensor | Sequence[Tensor | None] | None = None,
             retain_graph: bool | None = None, create_graph: bool = False, grad_variables: Any = None,
             inputs: Tensor | Sequence[Tensor] | None = None) -> None:
    """Accumulates the gradients of `tensors` (weighted by `grad_tensors`) into the leaves' .grad,
    or with `inputs` only into those tensors' .grad (non-leaves included). The arguments are read
    as torch reads them in C++ (csrc/autograd_engine.cpp), which Tensor.backward calls directly."""
    if grad_variables is not None:
        if grad_tensors is not None:
            raise RuntimeError("'grad_tensors' and 'grad_variables' (deprecated) arguments both passed to "
                               "backward(). Please only use 'grad_tensors'.")
        grad_tensors = grad_variables
    _C._run_backward(tensors, grad_tensors, retain_graph, create_graph, inputs)


def grad(outputs: Tensor | Sequence[Tensor], inputs: Tensor | Sequence[Tensor],
         grad_outputs: Tensor | Sequence[Tensor | None] | None = None, retain_graph: bool | None = None,
         create_graph: bool = False, allow_unused: bool = False, is_grads_batched: bool = False) -> tuple:
    """The gradients of `outputs` with respect to `inputs` (nothing accumulates into .grad)."""
    if is_grads_batched:
        raise NotImplementedError("grad: is_grads_batched is not supported")
    return _C._grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused)


class set_detect_anomaly:
    """Anomaly detection on or off: nodes remember the forward call site, and a NaN produced in
    backward raises RuntimeError naming the node and that call site. Sets the mode now (a plain
    call, as torch's) and, used as a context manager, restores the previous mode on exit.
    kael has no separate NaN check: check_nan=False leaves anomaly detection off."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.prev = _C.is_anomaly_enabled()
        _C._set_anomaly_enabled(bool(mode) and bool(check_nan))

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        _C._set_anomaly_enabled(self.prev)


def is_anomaly_enabled() -> bool:
    return _C.is_anomaly_enabled()


class detect_anomaly:
    """Context manager turning anomaly detection on for a block (the previous mode is restored
    on exit); also a decorator, each call of the function running in a fresh block."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan
        self._prev: list[bool] = []

    def __enter__(self) -> None:
        self._prev.append(_C.is_anomaly_enabled())
        _C._set_anomaly_enabled(bool(self.check_nan))

    def __exit__(self, *exc: object) -> None:
        _C._set_anomaly_enabled(self._prev.pop())

    def __call__(self, func: Callable) -> Callable:
        from kael.autograd.grad_mode import _DecoratorContextManager
        return _DecoratorContextManager.__call__(self, func)  # type: ignore[arg-type]

    def clone(self) -> "detect_anomaly":
        return type(self)(self.check_nan)


def explain(t: Tensor) -> str:
    """A readable text of the graph behind t: one line per node, indented by depth, with the
    shape of the gradient it receives and what it saved."""
    return _C._explain(t)


autograd_graph = explain


def graphviz(t: Tensor) -> str:
    """The graph behind t in Graphviz DOT."""
    return _C._graphviz(t)


# ---------------------------------------------------------------- Tensor methods

class RemovableHandle:
    """What register_hook returns: remove() unregisters the hook."""

    def __init__(self, tensor: Tensor, hook_id: int) -> None:
        import weakref
        self._tensor = weakref.ref(tensor)
        self.id = hook_id

    def remove(self) -> None:
        t = self._tensor()
        if t is not None:
            t._remove_hook(self.id)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def _tensor_register_hook(self: Tensor, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
    """Registers hook(grad) on this tensor's gradient; it may return a replacement."""
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    return RemovableHandle(self, self._register_hook(hook))

