"""kael.autograd.Function: operations written in Python that take part in the graph."""
from __future__ import annotations

from typing import Any

from kael import _C
from kael._C import Tensor
from kael.autograd.grad_mode import no_grad


class FunctionCtx:
    """The `ctx` a Function's forward and backward share."""

    def __init__(self) -> None:
        self._saved: tuple = ()
        self._versions: tuple = ()
        self._released = False
        self._non_differentiable: tuple = ()
        self.needs_input_grad: tuple = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save tensors or None, got {type(t).__name__}")
        self._saved = tensors
        self._versions = tuple(None if t is None else t._version for t in tensors)

    @property
    def saved_tensors(self) -> tuple:
        if self._released:
            raise RuntimeError("Trying to backward through the graph a second time (or directly access saved "
                               "tensors after they have already been freed). Specify retain_graph=True if you "
                               "need to backward through the graph a second time.")
        for i, (t, v) in enumerate(zip(self._saved, self._versions)):
            if t is not None and t._version != v:
                raise RuntimeError("one of the variables needed for gradient computation has been modified by an "
                                   f"inplace operation: saved tensor {i} of {self._name}, is at version "
                                   f"{t._version}; expected version {v} instead.")
        return self._saved

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        self._non_differentiable = tensors

    def mark_dirty(self, *tensors: Tensor) -> None:
        raise NotImplementedError("mark_dirty: in-place Functions are not supported")

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)


class Function:
    """Subclass with static forward(ctx, *args) and backward(ctx, *grads); call with .apply()."""

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a Function subclass must implement forward")

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> Any:
        raise NotImplementedError("a Function subclass must implement backward")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Function objects are not instantiated; call the class's apply()")

    @classmethod
    def apply(cls, *args: Any) -> Any:
        ctx = FunctionCtx()
        ctx._name = cls.__name__ + "Backward"
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        with no_grad():
            result = cls.forward(ctx, *args)
        single = not isinstance(result, tuple)
        outputs = (result,) if single else result
        if not (_C.is_grad_enabled() and any(ctx.needs_input_grad)):
            return result

        def run_backward(*grads: Tensor | None) -> Any:
            if ctx.materialize_grads:
                import kael
                grads = tuple(kael.zeros_like(o) if g is None and isinstance(o, Tensor) else g
                              for g, o in zip(grads, outputs))
            out = cls.backward(ctx, *grads)
            out = out if isinstance(out, tuple) else (out,)
            if len(out) > len(args) and all(g is None for g in out[len(args):]):
                out = out[:len(args)]
            if len(out) != len(args):
                raise RuntimeError(f"function {ctx._name} returned an incorrect number of gradients "
                                   f"(expected {len(args)}, got {len(out)})")
            return tuple(g if ctx.needs_input_grad[i] else None for i, g in enumerate(out))

        tensors = tuple(o if isinstance(o, Tensor) else None for o in outputs)
        recorded = _C._record_function(ctx._name, run_backward, args, tensors, ctx._non_differentiable)
        new = tuple(r if isinstance(o, Tensor) else o for r, o in zip(recorded, outputs))
        return new[0] if single else new
