"""The global switches of torch's top level that kael records: float32 matmul precision and
deterministic algorithms. kael's CPU kernels compute float32 products in float32 whatever the
precision, and no kernel changes with the deterministic switch (docs/decisions/namespaces.md);
they are kept so programs that set and read them run, and read back what they set."""
from __future__ import annotations

import warnings

__all__ = ["are_deterministic_algorithms_enabled", "get_deterministic_debug_mode", "get_float32_matmul_precision",
           "get_num_interop_threads", "is_deterministic_algorithms_warn_only_enabled", "set_deterministic_debug_mode",
           "set_float32_matmul_precision", "set_num_interop_threads", "use_deterministic_algorithms"]

_state = {"precision": "highest", "deterministic": False, "warn_only": False, "interop": None, "interop_set": False}
_PRECISIONS = ("highest", "high", "medium")


def get_float32_matmul_precision() -> str:
    """'highest' (the default), 'high' or 'medium'."""
    return _state["precision"]


def set_float32_matmul_precision(precision: str) -> None:
    """Records the precision float32 matrix products may use; an unknown name warns and changes
    nothing, as torch."""
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "set_float32_matmul_precision call has no effect.", UserWarning, stacklevel=2)
        return
    _state["precision"] = precision


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Records whether only deterministic algorithms should be used (and whether a
    nondeterministic one should only warn)."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' must be bool, not {type(mode).__name__}")
    if not isinstance(warn_only, bool):
        raise TypeError("use_deterministic_algorithms(): argument 'warn_only' must be bool, "
                        f"not {type(warn_only).__name__}")
    _state["deterministic"] = mode
    _state["warn_only"] = warn_only


def are_deterministic_algorithms_enabled() -> bool:
    return _state["deterministic"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _state["warn_only"]


def get_deterministic_debug_mode() -> int:
    """0 (off), 1 (warn) or 2 (error), from use_deterministic_algorithms."""
    if not _state["deterministic"]:
        return 0
    return 1 if _state["warn_only"] else 2


def set_deterministic_debug_mode(debug_mode) -> None:
    """0/'default', 1/'warn' or 2/'error': use_deterministic_algorithms by number or name."""
    names = {"default": 0, "warn": 1, "error": 2}
    if isinstance(debug_mode, str):
        if debug_mode not in names:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`, "
                               f"but got {debug_mode}")
        debug_mode = names[debug_mode]
    if not isinstance(debug_mode, int):
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode)}")
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_num_interop_threads() -> int:
    """The size torch gives its inter-op pool (the threads that run forked tasks): what
    set_num_interop_threads set, else the default number of intra-op threads. kael has no
    inter-op pool; the number is recorded for programs that set and read it."""
    if _state["interop"] is None:
        from kael import _C

        _state["interop"] = _C.get_num_threads()
    return _state["interop"]


def set_num_interop_threads(num: int) -> None:
    """Sets get_num_interop_threads(), once per process, as torch allows."""
    if isinstance(num, bool) or not isinstance(num, int):
        raise RuntimeError(f"set_num_interop_threads expects an int, but got {type(num).__name__}")
    if num <= 0:
        raise RuntimeError("set_num_interop_threads expects a positive integer")
    if _state["interop_set"]:
        raise RuntimeError("Error: cannot set number of interop threads after parallel work has started or "
                           "set_num_interop_threads called")
    _state["interop"], _state["interop_set"] = num, True
