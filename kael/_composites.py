"""torch's other spellings of kael's ops, and the few torch functions still written in Python
from registered ops (so autograd, a Python key and every device see those ops): the aliases
(``multiply`` is ``mul``, ``clip`` is ``clamp``...: the same C functions and methods, so an
error names the op, ``mul()``), ``broadcast_shapes`` (shapes, no tensor) and
``finfo``/``iinfo``. Each is compared against torch
in test/python/ops/test_composites.py."""
from __future__ import annotations

import builtins as _builtins

from kael import _C
from kael._C import Tensor

# ---------------------------------------------------------------------------------- aliases

# torch name -> kael name, for both kael.<name> (where the original is a function) and
# Tensor.<name> (where it is a method); in-place forms follow their originals.
_ALIASES = {
    "multiply": "mul", "subtract": "sub", "divide": "div", "true_divide": "div", "negative": "neg",
    "absolute": "abs", "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le",
    "not_equal": "ne", "clip": "clamp", "arctan2": "atan2", "fix": "trunc", "arccos": "acos",
    "arcsin": "asin", "arctan": "atan", "concat": "cat", "concatenate": "cat", "swapdims": "swapdims",
    "ger": "outer", "row_stack": "vstack",
}


def _aliases():
    functions, methods = {}, {}
    for alias, name in _ALIASES.items():
        if alias == name:
            continue
        if hasattr(_C, name):
            functions[alias] = getattr(_C, name)
        for suffix in ("", "_"):
            original = Tensor.__dict__.get(name + suffix)
            if original is not None:
                methods[alias + suffix] = original
    methods["ndimension"] = Tensor.__dict__["dim"]
    methods["nelement"] = Tensor.__dict__["numel"]
    return functions, methods


# ---------------------------------------------------------------------------------- views


def broadcast_shapes(*shapes):
    """The shape the given shapes broadcast to (ints are 1-d shapes), as torch.broadcast_shapes."""
    result = []
    for shape in shapes:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        for s in shape:
            if not isinstance(s, int) or isinstance(s, _builtins.bool):
                raise TypeError(f"broadcast_shapes: expected ints in the shapes, got {type(s).__name__}")
            if s < 0:
                raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(shape)}")
        n = max(len(result), len(shape))
        a = [1] * (n - len(result)) + result
        b = [1] * (n - len(shape)) + list(shape)
        for i in range(n):
            if a[i] != b[i] and a[i] != 1 and b[i] != 1:
                raise RuntimeError(f"Shape mismatch: objects cannot be broadcast to a single shape.  "
                                   f"Mismatch is between arg 0 and arg 1: {tuple(a)} and {tuple(b)}")
        result = [b[i] if a[i] == 1 else a[i] for i in range(n)]
    return _C.Size(result) if hasattr(_C, "Size") else tuple(result)


# ---------------------------------------------------------------------------------- dtype facts


class finfo:
    """Machine limits of a floating dtype (kael.finfo(kael.float16).max), as torch.finfo."""

    _TABLE = {
        # bits, eps, max, tiny (smallest normal), resolution
        "float16": (16, 2.0 ** -10, 65504.0, 2.0 ** -14, 0.001),
        "bfloat16": (16, 2.0 ** -7, 3.3895313892515355e38, 1.1754943508222875e-38, 0.01),
        "float32": (32, 2.0 ** -23, 3.4028234663852886e38, 1.1754943508222875e-38, 1e-06),
        "float64": (64, 2.0 ** -52, 1.7976931348623157e308, 2.2250738585072014e-308, 1e-15),
    }

    def __init__(self, type=None):
        type = _C.get_default_dtype() if type is None else type
        name = str(type).split(".")[-1]
        if name not in self._TABLE:
            raise TypeError(f"finfo: expected a floating point dtype, got {type}")
        self.bits, self.eps, self.max, self.tiny, self.resolution = self._TABLE[name]
        self.min = -self.max
        self.smallest_normal = self.tiny
        self.dtype = name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype (kael.iinfo(kael.int32).max), as torch.iinfo."""

    _TABLE = {"uint8": (8, 0, 255), "int8": (8, -128, 127), "int16": (16, -2 ** 15, 2 ** 15 - 1),
              "int32": (32, -2 ** 31, 2 ** 31 - 1), "int64": (64, -2 ** 63, 2 ** 63 - 1)}

    def __init__(self, type):
        name = str(type).split(".")[-1]
        if name not in self._TABLE:
            raise TypeError(f"iinfo: expected an integer dtype, got {type}")
        self.bits, self.min, self.max = self._TABLE[name]
        self.dtype = name

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


# ---------------------------------------------------------------------------------- registration

FUNCTIONS = ["broadcast_shapes", "finfo", "iinfo"]
METHODS: list[str] = []


# The Tensor members install() adds (kael/_C.pyi's hand-written part has their stubs, the
# aliases excepted: they are the generated methods under another name).
TENSOR_MEMBERS: dict = {}
ALIAS_MEMBERS = {alias + suffix for alias in _ALIASES for suffix in ("", "_")} | {"ndimension", "nelement"}


def install(namespace: dict, extend):
    """Adds the functions to the kael namespace and the methods to kael.Tensor (through `extend`,
    which wraps them for __kael_function__ overrides); returns the function names added."""
    functions, methods = _aliases()
    for name in FUNCTIONS:
        functions[name] = globals()[name]
    namespace.update(functions)
    methods.update({name: globals()[name] for name in METHODS})
    extend(methods)
    TENSOR_MEMBERS.update(methods)
    return list(functions)
