"""kael.autograd.Function: operations written in Python that take part in the graph."""
from __future__ import annotations

from typing import Any

from kael import _C
from kael._C import Tensor
from kael.autograd.grad_mode import no_grad


def _check_tensors(what: str, values: tuple, error: type[Exception] = RuntimeError, none_ok: bool = False) -> None:
    for i, t in enumerate(values):
        if not (isinstance(t, Tensor) or (none_ok and t is None)):
            raise error(f"{what}, but argument {i} is of type {type(t).__name__}")


class FunctionCtx:
    """The `ctx` a Function's forward and backward share."""

    def __init__(self) -> None:
        self._to_save: tuple = ()
        self._saved_tensors: Any = None  # after recording: the node's saved tensors (a weak link to it)
        self._non_differentiable: tuple = ()
        self._dirty: tuple = ()
        self.needs_input_grad: tuple = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Saves tensors (or None) for backward, where ctx.saved_tensors checks that none of them
        was modified in place since."""
        _check_tensors("save_for_backward can only save variables", tensors, TypeError, none_ok=True)
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
        """Outputs that get no gradient: they do not require grad, and backward receives zeros
        (None without materialized gradients) for them."""
        _check_tensors("mark_non_differentiable only accepts variable arguments", tensors)
        self._non_differentiable = tensors

    def mark_dirty(self, *tensors: Tensor) -> None:
        """Inputs that forward modified in place; each must be returned as an output, and comes
        back as the same object with its history rebased onto this Function (a leaf that
        requires grad cannot be modified: RuntimeError, as torch)."""
        _check_tensors("mark_dirty can only accept variables", tensors)
        self._dirty = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """Whether backward receives zeros (True, the default) or None for the outputs that no
        gradient reached."""
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
        name = ctx._name = cls.__name__ + "Backward"
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        with no_grad():
            result = cls.forward(ctx, *args)
        single = not isinstance(result, tuple)
        outputs = (result,) if single else result
        if ctx._dirty and not all(any(o is d for o in outputs) for d in ctx._dirty):
            raise RuntimeError("Some elements marked as dirty during the forward method were not returned as output. "
                               "The inputs that are modified inplace must all be outputs of the Function.")
        if not (_C.is_grad_enabled() and any(ctx.needs_input_grad)):
            if not any(isinstance(o, Tensor) and any(o is a for a in args) for o in outputs):
                return result
            # nothing recorded: an input returned comes back detached when it requires grad, as
            # itself when it was modified in place (mark_dirty), else as a view of itself (torch)
            new = []
            for o in outputs:
                if isinstance(o, Tensor) and any(o is a for a in args):
                    if o.requires_grad:
                        o = o.detach()
                    elif not any(o is d for d in ctx._dirty):
                        with no_grad():
                            o = o.view_as(o)
                new.append(o)
            return new[0] if single else tuple(new)

        # The node keeps run_backward, so it holds no tensor (an output would refer back to the node):
        # only the outputs' shapes and dtypes, and the number of arguments. The node has one
        # gradient slot per tensor output; backward gets one argument per output, None for the
        # outputs that are not tensors (as torch).
        out_meta = tuple((tuple(o.shape), o.dtype) if isinstance(o, Tensor) else None for o in outputs)
        tensor_positions = tuple(i for i, o in enumerate(outputs) if isinstance(o, Tensor))
        tensor_args = tuple(isinstance(a, Tensor) for a in args)
        n_args = len(args)
        # Without materialized gradients, the outputs no gradient reached get None: the engine
        # fills zeros into a node's empty slots, so a hook on each output notes which received one.
        received: set[int] | None = None if ctx.materialize_grads else set()

        def run_backward(*grads: Tensor | None) -> Any:
            full: list = [None] * len(out_meta)
            for pos, g in zip(tensor_positions, grads):
                full[pos] = g
            if received is not None:
                full = [g if i in received else None for i, g in enumerate(full)]
                received.clear()
            elif ctx.materialize_grads:
                import kael
                full = [kael.zeros(m[0], dtype=m[1]) if g is None and m is not None else g
                        for g, m in zip(full, out_meta)]
            out = cls.backward(ctx, *full)
            out = out if isinstance(out, tuple) else (out,)
            if len(out) > n_args and all(g is None for g in out[n_args:]):
                out = out[:n_args]
            if len(out) != n_args:
                raise RuntimeError(f"function {name} returned an incorrect number of gradients "
                                   f"(expected {n_args}, got {len(out)})")
            for i, g in enumerate(out):
                if g is None:
                    continue
                if not tensor_args[i]:
                    raise RuntimeError(f"function {name} returned a gradient different than None at position {i + 1}, "
                                       "but the corresponding forward input was not a Variable")
                if not isinstance(g, Tensor):
                    raise RuntimeError(f"expected Variable or None (got {type(g).__name__})")
            return tuple(g if ctx.needs_input_grad[i] else None for i, g in enumerate(out))

        tensors = tuple(o if isinstance(o, Tensor) else None for o in outputs)
        recorded, ctx._saved_tensors = _C._record_function(name, run_backward, args, tensors,
                                                           ctx._non_differentiable, ctx._to_save, ctx._dirty)
        ctx._to_save = ()
        new = tuple(r if isinstance(o, Tensor) else o for r, o in zip(recorded, outputs))
        if received is not None:
            for pos in tensor_positions:
                if new[pos].grad_fn is not None:
                    new[pos]._register_hook(_Received(received, pos))
        return new[0] if single else new


class _Received:
    """A hook noting that output `pos` of a Function received a gradient (it keeps the gradient)."""

    __slots__ = ("seen", "pos")

    def __init__(self, seen: set, pos: int) -> None:
        self.seen, self.pos = seen, pos

    def __call__(self, grad: Tensor) -> None:
        self.seen.add(self.pos)
