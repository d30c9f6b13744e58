"""Grad mode: thread-local switches for recording operations (torch.autograd.grad_mode)."""
from __future__ import annotations

import functools
import inspect
import sys
import threading
import warnings
from typing import Any, Callable, TypeVar

from kael import _C

F = TypeVar("F", bound=Callable[..., Any])


def _wrap_generator(ctx_factory: Callable[[], Any], func: Callable) -> Callable:
    """Each step of the generator runs inside a fresh context from ctx_factory (torch's
    _contextlib): the caller's mode is untouched between steps."""

    @functools.wraps(func)
    def generator_context(*args: Any, **kwargs: Any) -> Any:
        gen = func(*args, **kwargs)
        try:
            with ctx_factory():
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with ctx_factory():
                        gen.close()
                    raise
                except BaseException:
                    with ctx_factory():
                        response = gen.throw(*sys.exc_info())
                else:
                    with ctx_factory():
                        response = gen.send(request)
        except StopIteration as e:
            return e.value

    return generator_context


class _DecoratorContextManager:
    """A context manager that is also a decorator: each call of the decorated function (each step
    of a decorated generator) runs in a fresh instance from clone()."""

    def __call__(self, orig_func: F) -> F:
        if inspect.isclass(orig_func):
            warnings.warn("Decorating classes is deprecated and will be disabled in future versions. You should "
                          "only decorate functions or methods. To preserve the current behavior of class "
                          "decoration, you can directly decorate the `__init__` method and nothing else.",
                          FutureWarning, stacklevel=2)
            cls = orig_func
            func: Callable = lambda *args, **kwargs: cls(*args, **kwargs)  # noqa: E731
        else:
            func = orig_func
        if inspect.isgeneratorfunction(func):
            return _wrap_generator(self.clone, func)  # type: ignore[return-value]

        @functools.wraps(func)
        def decorate_context(*args: Any, **kwargs: Any) -> Any:
            with self.clone():
                return func(*args, **kwargs)
        return decorate_context  # type: ignore[return-value]

    def __enter__(self) -> None:
        raise NotImplementedError

    def __exit__(self, *exc: object) -> None:
        raise NotImplementedError

    def clone(self) -> "_DecoratorContextManager":
        return type(self)()


class _NoParamDecoratorContextManager(_DecoratorContextManager):
    """Also a decorator without parentheses: `@no_grad` as well as `@no_grad()`."""

    def __new__(cls, orig_func: Callable | None = None) -> Any:
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class _GradMode(_NoParamDecoratorContextManager):
    """Sets grad mode on entry and restores the previous mode on exit (also on exceptions).
    Re-entrant: each `with` on the same instance saves and restores its own previous mode."""

    _mode: bool

    def __init__(self) -> None:
        self._prev: list[bool] = []

    @property
    def prev(self) -> bool:
        """The mode the latest entry found (torch's attribute; False before any entry)."""
        return self._prev[-1] if self._prev else False

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
    """Sets grad mode to `mode` now (as a function) or for a block (as a context manager). As a
    decorator it restores the mode it found when it was made (the decoration is not a call), and
    each call of the function runs with `mode`."""

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled(): argument 'mode' (position 1) must be bool, not {type(mode).__name__}")
        self.prev = _C.is_grad_enabled()
        self.mode = mode
        _C._set_grad_enabled(mode)

    def __call__(self, orig_func: F) -> F:
        _C._set_grad_enabled(self.prev)
        return super().__call__(orig_func)

    def __enter__(self) -> None:
        _C._set_grad_enabled(self.mode)

    def __exit__(self, *exc: object) -> None:
        _C._set_grad_enabled(self.prev)

    def __str__(self) -> str:
        return f"{type(self).__module__}.{type(self).__qualname__}(mode={self.mode})"

    def __repr__(self) -> str:
        return str(self)

    def clone(self) -> "set_grad_enabled":
        return type(self)(self.mode)


class inference_mode(_DecoratorContextManager):
    """Context manager and decorator for inference: no recording (grad mode off). Also
    `@inference_mode` without parentheses, as torch allows."""

    def __new__(cls, mode: Any = True) -> Any:
        if isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)

    def __init__(self, mode: bool = True) -> None:
        self.mode = mode
        self._prev: list[tuple[bool, bool]] = []

    def __enter__(self) -> None:
        self._prev.append((_C.is_grad_enabled(), _C.is_inference_mode_enabled()))
        _C._set_inference_mode(self.mode)
        _C._set_grad_enabled(not self.mode)  # torch's InferenceMode guard: grad mode is !mode

    def __exit__(self, *exc: object) -> None:
        grad, inference = self._prev.pop()
        _C._set_inference_mode(inference)
        _C._set_grad_enabled(grad)

    def clone(self) -> "inference_mode":
        return type(self)(self.mode)


_multithreading = threading.local()


def _is_multithreading_enabled() -> bool:
    return getattr(_multithreading, "enabled", True)


class set_multithreading_enabled(_DecoratorContextManager):
    """Whether backward may use worker threads (torch's thread-local switch). kael's engine always
    runs on the calling thread, so the flag is only recorded, with torch's function, context and
    decorator forms; as a decorator it restores the setting it found, as set_grad_enabled does."""

    def __init__(self, mode: bool) -> None:
        self.prev = _is_multithreading_enabled()
        self.mode = mode
        _multithreading.enabled = bool(mode)

    def __call__(self, orig_func: F) -> F:
        _multithreading.enabled = self.prev
        return super().__call__(orig_func)

    def __enter__(self) -> None:
        _multithreading.enabled = bool(self.mode)

    def __exit__(self, *exc: object) -> None:
        _multithreading.enabled = self.prev

    def clone(self) -> "set_multithreading_enabled":
        return type(self)(self.mode)


def is_grad_enabled() -> bool:
    """Whether gradient recording is on on this thread."""
    return _C.is_grad_enabled()


def is_inference_mode_enabled() -> bool:
    return _C.is_inference_mode_enabled()
