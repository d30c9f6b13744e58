"""kael.autograd.Variable: torch's pre-0.4 wrapper, kept as torch keeps it. Tensors and Variables
have been one type since; Variable(tensor, requires_grad=...) returns a plain kael.Tensor over
the same storage (detached from tensor's graph, sharing its version counter), and
isinstance(x, Variable) is isinstance(x, kael.Tensor)."""
from __future__ import annotations

import warnings

from kael._C import Tensor

__all__ = ["Variable"]


class _VariableMeta(type):
    def __instancecheck__(cls, other) -> bool:
        return isinstance(other, Tensor)

    def __call__(cls, data=None, requires_grad: bool = False, volatile: bool = False, **kwargs):
        import kael

        for key in kwargs:
            raise TypeError(f"Variable(): '{key}' is an invalid keyword argument")
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with kael.no_grad():` instead.",
                          UserWarning, stacklevel=2)
        if isinstance(requires_grad, str) or not hasattr(requires_grad, "__index__"):
            raise TypeError(f"Variable(): requires_grad must be a bool, got {type(requires_grad).__name__}")
        if data is None:
            data = kael.empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        result = data.detach()
        if requires_grad:
            result.requires_grad_(True)
        return result


class Variable(metaclass=_VariableMeta):
    """Variable(data=None, requires_grad=False): data as a new leaf kael.Tensor (see the module
    docstring); Variable() is an empty float tensor."""
