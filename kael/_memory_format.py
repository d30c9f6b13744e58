"""Memory formats as torch has them: kael.memory_format and its four values, and the
``memory_format=`` argument of Tensor.contiguous / is_contiguous / clone / to, kael.empty and
the *_like factories. See docs/decisions/memory-format.md.

A memory format is only a choice of strides. Every conversion here is kael.empty_strided with
the format's strides followed by Tensor.copy_, two registered ops, so the dispatcher and autograd
see it (copy_'s derivative passes the gradient to the source)."""
from __future__ import annotations

import builtins as _builtins

from kael import _C
from kael._C import Tensor


class memory_format:
    """The layout a tensor's strides describe: kael.contiguous_format (row-major),
    kael.channels_last (NHWC order for a 4-D NCHW tensor), kael.channels_last_3d (NDHWC for a
    5-D tensor), kael.preserve_format (keep the input's layout)."""

    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return f"kael.{self._name}"

    def __reduce__(self):
        return self._name


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")

# the dimension orders, innermost first, of the channels-last formats
_ORDER = {channels_last: (4, (1, 3, 2, 0)), channels_last_3d: (5, (1, 4, 3, 2, 0))}

_orig_contiguous = Tensor.contiguous
_orig_is_contiguous = Tensor.is_contiguous
_orig_clone = Tensor.clone
_orig_to = Tensor.to


def _check(fmt, op):
    if not isinstance(fmt, memory_format):
        raise TypeError(f"{op}(): argument 'memory_format' must be kael.memory_format, "
                        f"not {type(fmt).__name__}")
    return fmt


def _strides_for(sizes, fmt):
    """The strides of a dense tensor of sizes in format fmt (contiguous or channels-last)."""
    sizes = tuple(sizes)
    if fmt is contiguous_format:
        order = tuple(range(len(sizes) - 1, -1, -1))
    else:
        rank, order = _ORDER[fmt]
        if len(sizes) != rank:
            raise RuntimeError(f"required rank {rank} tensor to use {fmt._name} format")
    strides = [0] * len(sizes)
    expected = 1
    for d in order:  # as torch: contiguous strides skip a 0 size, the channels-last ones do not
        strides[d] = expected
        expected *= _builtins.max(sizes[d], 1) if fmt is contiguous_format else sizes[d]
    return tuple(strides)


def _is_contiguous_as(t, fmt):
    """torch's rule: dims of size 1 may have any stride; the others must be dense in fmt's order."""
    if fmt is contiguous_format:
        return _orig_is_contiguous(t)
    rank, order = _ORDER[fmt]
    sizes, strides = t.shape, t.stride()
    if len(sizes) != rank:
        return False
    expected = 1
    for d in order:
        if sizes[d] != 1:
            if strides[d] != expected:
                return False
            expected *= sizes[d]
    return True


def _restrided(t, strides):
    """A copy of t with the given strides: empty_strided + copy_, so autograd records CopyBackward."""
    out = _C.empty_strided(tuple(t.shape), strides, dtype=t.dtype, device=t.device)
    return out.copy_(t)


def _is_non_overlapping_and_dense(t):
    if t.numel() == 0:  # as torch: an empty tensor counts as contiguous, hence dense
        return True
    sizes, strides = t.shape, t.stride()
    perm = sorted(range(len(sizes)), key=lambda d: (sizes[d] < 2, strides[d]))
    required = 1
    for d in perm:
        if sizes[d] < 2:
            return True
        if strides[d] != required:
            return False
        required *= sizes[d]
    return True


def _is_channels_last_strides(t, fmt):
    """torch's is_channels_last_strides_2d/3d: the strides increase in fmt's dimension order."""
    rank, order = _ORDER[fmt]
    sizes, strides = t.shape, t.stride()
    if len(sizes) != rank or strides[1] == 0:
        return False
    minimum = 0
    for d in order:
        if sizes[d] == 0 or strides[d] < minimum:
            return False
        if d == 0 and minimum == strides[1]:
            return False
        minimum = strides[d]
        if sizes[d] > 1:
            minimum *= sizes[d]
    return True


def _preserved_strides(t):
    """The strides preserve_format gives a copy of t: t's own when t is dense and non-overlapping,
    otherwise the format t's strides suggest (channels-last or contiguous)."""
    if _is_non_overlapping_and_dense(t):
        return tuple(t.stride())
    return _dense_strides_in_memory_order(tuple(t.shape), tuple(t.stride()))


def _dense_strides_in_memory_order(shape, strides):
    """Dense strides with the dims in the order of t's strides (torch's infer_dense_strides, the
    order a pointwise op's output takes): dims sorted fastest first by stride, a stride of 0 or a
    size-1 dim leaving the order as it is."""
    nd = len(shape)
    perm = list(range(nd - 1, -1, -1))  # fastest first

    def should_swap(d0, d1):
        s0, s1 = strides[d0], strides[d1]
        if s0 == 0 or s1 == 0:
            return 0
        if s0 != s1:
            return 1 if s0 > s1 else -1
        return 1 if shape[d0] > shape[d1] else 0

    for i in range(1, nd):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    out, s = [0] * nd, 1
    for d in perm:
        out[d] = s
        s *= max(shape[d], 1)
    return tuple(out)


def _contiguous(self, memory_format=contiguous_format):
    """contiguous(memory_format=kael.contiguous_format) -> Tensor

    Returns input if it is contiguous in memory_format, otherwise a copy laid out that way."""
    fmt = _check(memory_format, "contiguous")
    if fmt is contiguous_format:
        return _orig_contiguous(self)
    if fmt is preserve_format:  # as torch: fine on a contiguous input, an error otherwise
        if _orig_is_contiguous(self):
            return self
        raise RuntimeError("contiguous(): preserve memory format is unsupported by the contiguous operator")
    if _is_contiguous_as(self, fmt):
        return self
    return _restrided(self, _strides_for(self.shape, fmt))


def _is_contiguous(self, memory_format=None):
    """is_contiguous(memory_format=None) -> bool

    Whether the strides are dense in memory_format's dimension order (size-1 dims excepted);
    None is kael.contiguous_format."""
    fmt = contiguous_format if memory_format is None else _check(memory_format, "is_contiguous")
    return _is_contiguous_as(self, contiguous_format if fmt is preserve_format else fmt)


def _clone(self, *, memory_format=preserve_format):
    """clone(*, memory_format=kael.preserve_format) -> Tensor

    A copy with its own storage; preserve_format keeps a dense non-overlapping input's strides."""
    fmt = _check(memory_format, "clone")
    if fmt is preserve_format:
        result = _orig_clone(self)
        if result.stride() == self.stride():  # the common case; a fresh dense copy with them is right
            return result
        strides = _preserved_strides(self)
        if tuple(result.stride()) == strides:
            return result
        # kael's clone lays out size-1 dims its own way; torch keeps every stride of a dense input
        return _restrided(self, strides)
    return _restrided(self, _strides_for(self.shape, fmt))


def _to(self, *args, memory_format=preserve_format, **kwargs):
    """to(..., memory_format=kael.preserve_format): Tensor.to, then the layout memory_format asks
    for (preserve_format: a new tensor keeps input's layout, as torch's)."""
    fmt = _check(memory_format, "to")
    result = _orig_to(self, *args, **kwargs) if args or kwargs else self
    if result is self:  # as torch: no copy while input's strides suggest the format asked for
        if fmt is preserve_format or _suggested_format(self) is fmt:
            return self
        return _restrided(self, _strides_for(self.shape, fmt))
    if fmt is preserve_format and result.stride() == self.stride():  # the common case, as in clone
        return result
    strides = _preserved_strides(self) if fmt is preserve_format else _strides_for(self.shape, fmt)
    if tuple(result.stride()) == strides:
        return result
    return _restrided(result, strides)


def _suggested_format(t):
    """torch's suggest_memory_format: channels-last when the strides increase in its order."""
    for fmt in (channels_last, channels_last_3d):
        if _is_channels_last_strides(t, fmt):
            return fmt
    return contiguous_format


def _factory_layout(result, input, fmt, requires_grad):
    """result (a fresh tensor) laid out as fmt asks (preserve_format: like input)."""
    strides = _preserved_strides(input) if fmt is preserve_format else _strides_for(result.shape, fmt)
    if tuple(result.stride()) == strides:
        return result
    with _no_grad():
        out = _restrided(result, strides)
    if requires_grad:
        out.requires_grad_(True)
    return out


def _no_grad():
    import kael
    return kael.no_grad()


def _like(name):
    original = getattr(_C, name)

    def like(input, *args, memory_format=preserve_format, **kwargs):
        fmt = _check(memory_format, name)
        result = original(input, *args, **kwargs)
        if not isinstance(result, Tensor) or not isinstance(input, Tensor):  # a __kael_function__ override's
            return result
        if fmt is preserve_format and result.stride() == input.stride():  # the common case
            return result
        return _factory_layout(result, input, fmt, kwargs.get("requires_grad", False))

    like.__name__ = like.__qualname__ = name
    like.__doc__ = (original.__doc__ or "") + "\nmemory_format: the layout of the result (default: like input)."
    return like


empty_like = _like("empty_like")
zeros_like = _like("zeros_like")
ones_like = _like("ones_like")
full_like = _like("full_like")
rand_like = _like("rand_like")
randn_like = _like("randn_like")


def empty(*size, memory_format=contiguous_format, **kwargs):
    """kael.empty(*size, dtype=None, device=None, requires_grad=False, memory_format=kael.contiguous_format)"""
    fmt = _check(memory_format, "empty")
    if fmt is preserve_format:
        raise RuntimeError("empty(): preserve memory format is unsupported by the empty operator")
    result = _C.empty(*size, **kwargs)
    if fmt is contiguous_format:
        return result
    return _factory_layout(result, result, fmt, kwargs.get("requires_grad", False))


METHODS = {"contiguous": _contiguous, "is_contiguous": _is_contiguous, "clone": _clone, "to": _to}


def clone(input, *, memory_format=preserve_format):
    """clone(input, *, memory_format=kael.preserve_format) -> Tensor"""
    if not isinstance(input, Tensor):  # the parser's TypeError, or a __kael_function__ override's result
        return _C.clone(input) if memory_format is preserve_format else _C.clone(input, memory_format=memory_format)
    return input.clone(memory_format=memory_format)


# kael.<name> replaced by the versions above that take memory_format=
FUNCTIONS = {"empty": empty, "empty_like": empty_like, "zeros_like": zeros_like, "ones_like": ones_like,
             "full_like": full_like, "rand_like": rand_like, "randn_like": randn_like, "clone": clone}
NAMES = ["memory_format", "contiguous_format", "channels_last", "channels_last_3d", "preserve_format"]
