"""Print options of the tensor repr, as torch.set_printoptions (Note [Print options] in
kael/core/tensor.h: the repr itself is C++'s, Tensor::to_string)."""
from __future__ import annotations

import contextlib
import math
import operator
from typing import Any

from kael import _C

_PROFILES = {
    # precision, threshold, edgeitems, linewidth
    "default": (4, 1000, 3, 80),
    "short": (2, 1000, 2, 80),
    "full": (4, math.inf, 3, 80),
}


def _int(name: str, value, minimum=None) -> int:
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"set_printoptions(): {name} must be an int, got {type(value).__name__}") from None
    if minimum is not None and v < minimum:
        raise ValueError(f"set_printoptions(): {name} must be >= {minimum}, got {v}")
    return v


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """Sets the options of the tensor repr, as torch.set_printoptions.

    precision: digits after the point (default 4); threshold: element count above which the
    repr is summarised (default 1000; math.inf never); edgeitems: items kept at each end of a
    summarised dim (default 3); linewidth: characters per line (default 80); profile: 'default',
    'short' or 'full' sets the four first, then the ones given override it; sci_mode: True or
    False forces scientific notation on or off, None (the default, and what every call without
    it sets) chooses it from the values.
    """
    current = list(_C._get_printoptions())
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions(): profile must be one of 'default', 'short' or 'full', "
                             f"got {profile!r}")
        current[:4] = _PROFILES[profile]
    if precision is not None:
        current[0] = _int("precision", precision, 0)
    if threshold is not None:
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or threshold != threshold:
            raise TypeError(f"set_printoptions(): threshold must be a number, got {threshold!r}")
        current[1] = threshold
    if edgeitems is not None:
        current[2] = _int("edgeitems", edgeitems, 0)
    if linewidth is not None:
        current[3] = _int("linewidth", linewidth)
    if sci_mode is not None and not isinstance(sci_mode, bool):
        raise TypeError(f"set_printoptions(): sci_mode must be True, False or None, got {sci_mode!r}")
    current[4] = -1 if sci_mode is None else int(sci_mode)
    _C._set_printoptions(current[0], float(current[1]), current[2], current[3], current[4])


def get_printoptions() -> dict[str, Any]:
    """The current print options as keyword arguments of set_printoptions (torch's
    torch._tensor_str.get_printoptions)."""
    precision, threshold, edgeitems, linewidth, sci_mode = _C._get_printoptions()
    return {"precision": precision, "threshold": int(threshold) if threshold.is_integer() else threshold,
            "edgeitems": edgeitems, "linewidth": linewidth, "sci_mode": None if sci_mode < 0 else bool(sci_mode)}


@contextlib.contextmanager
def printoptions(**kwargs):
    """Sets the print options for the with-block and restores them after it."""
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)
