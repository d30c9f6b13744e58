"""Grad mode: thread-local switches for recording operations (torch.autograd.grad_mode)."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, TypeVar

from kael import _C

F = TypeVar("F", bound=Callable[..., Any])


class _DecoratorContextManager:
    """A context manager that is also a decorator (a fresh instance per call of the function)."""

    def __call__(self, func: F) -> F:
        if inspect.isclass(func):
            raise RuntimeError(f"{type(self).__name__} cannot decorate a class; decorate its methods")
        if inspect.isgeneratorfunction(func):
            @functools.wraps(func)
            def generator(*args: Any, **kwargs: Any) -> Any:
                gen = func(*args, **kwargs)
                with self.clone():
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        with self.clone():
                            gen.close()
                        raise
                    except BaseException as e:
                        with self.clone():
                            response = gen.throw(e)
                    else:
                        with self.clone():
                            response = gen.send(request)
            return generator  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.clone():
                return func(*args, **kwargs)
        return wrapper  # type: ignore[return-value]

    def clone(self) -> "_DecoratorContextManager":
        return type(self)()


class _GradMode(_DecoratorContextManager):
    """Sets grad mode on entry and restores the previous mode on exit (also on exceptions).
    Re-entrant: each `with` on the same instance saves and restores its own previous mode."""

    _mode: bool

    def __init__(self) -> None:
        self._prev: list[bool] = []

    def __enter__(self) -> None:
        self._prev.append(_C.is_grad_enabled())
        _C._set_grad_enabled(self._mode)

    def __exit__(self, *exc: object) -> None:
        _C._set_grad_enabled(self._prev.pop())


class no_grad(_GradMode):
    """Context manager and decorator that turns gradient recording off on this thread."""

    _mode = False


class enable_grad(_GradMode):
    """Context manager and decorator that turns gradient recording on on this thread."""

    _mode = True


class set_grad_enabled(_DecoratorContextManager):
    """Sets grad mode to `mode` now (as a function) or for a block (as a context manager)."""

    def __init__(self, mode: bool) -> None:
        self._prev = _C.is_grad_enabled()
        self.mode = bool(mode)
        _C._set_grad_enabled(self.mode)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        _C._set_grad_enabled(self._prev)

    def clone(self) -> "set_grad_enabled":
        return type(self)(self.mode)


class inference_mode(_DecoratorContextManager):
    """Context manager and decorator for inference: no recording (grad mode off)."""

    def __init__(self, mode: bool = True) -> None:
        self.mode = bool(mode)
        self._prev: list[tuple[bool, bool]] = []

    def __call__(self, func: F) -> F:
        if isinstance(func, bool):  # inference_mode(False) misused as a decorator factory
            return inference_mode(func)  # type: ignore[return-value]
        return super().__call__(func)

    def __enter__(self) -> None:
        self._prev.append((_C.is_grad_enabled(), _C.is_inference_mode_enabled()))
        _C._set_inference_mode(self.mode)
        if self.mode:
            _C._set_grad_enabled(False)

    def __exit__(self, *exc: object) -> None:
        grad, inference = self._prev.pop()
        _C._set_inference_mode(inference)
        _C._set_grad_enabled(grad)

    def clone(self) -> "inference_mode":
        return type(self)(self.mode)


def is_grad_enabled() -> bool:
    """Whether gradient recording is on on this thread."""
    return _C.is_grad_enabled()


def is_inference_mode_enabled() -> bool:
    return _C.is_inference_mode_enabled()
