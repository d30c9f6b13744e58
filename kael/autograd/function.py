"""kael.autograd.Function: operations written in Python that take part in the graph."""
from __future__ import annotations

from typing import Any

from kael import _C
from kael._C import Tensor
from kael.autograd.grad_mode import no_grad


class FunctionCtx:
    """The `ctx` a Function's forward and backward share."""

    def __init__(self) -> None:
        self._to_save: tuple = ()
        self._saved_tensors: Any = None  # after recording: the node's saved tensors (a weak link to it)
        self._non_differentiable: tuple = ()
        self.needs_input_grad: tuple = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save tensors or None, got {type(t).__name__}")
        self._to_save = tensors

    @property
    def saved_tensors(self) -> tuple:
        """The saved tensors, checked as autograd checks its own (RuntimeError when one was modified
        in place since, or when the graph was freed). They live in the graph node, which refers to
        an output of the Function without a cycle through this ctx."""
        if self._saved_tensors is not None:
            return self._saved_tensors()
        return self._to_save

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

        # The node keeps run_backward, so it holds no tensor (an output would refer back to the node):
        # only the outputs' shapes and dtypes, and the number of arguments.
        out_meta = tuple((tuple(o.shape), o.dtype) if isinstance(o, Tensor) else None for o in outputs)
        n_args = len(args)

        def run_backward(*grads: Tensor | None) -> Any:
            if ctx.materialize_grads:
                import kael
                grads = tuple(kael.zeros(m[0], dtype=m[1]) if g is None and m is not None else g
                              for g, m in zip(grads, out_meta))
            out = cls.backward(ctx, *grads)
            out = out if isinstance(out, tuple) else (out,)
            if len(out) > n_args and all(g is None for g in out[n_args:]):
                out = out[:n_args]
            if len(out) != n_args:
                raise RuntimeError(f"function {ctx._name} returned an incorrect number of gradients "
                                   f"(expected {n_args}, got {len(out)})")
            return tuple(g if ctx.needs_input_grad[i] else None for i, g in enumerate(out))

        tensors = tuple(o if isinstance(o, Tensor) else None for o in outputs)
        recorded, ctx._saved_tensors = _C._record_function(ctx._name, run_backward, args, tensors,
                                                           ctx._non_differentiable, ctx._to_save)
        ctx._to_save = ()
        new = tuple(r if isinstance(o, Tensor) else o for r, o in zip(recorded, outputs))
        return new[0] if single else new
