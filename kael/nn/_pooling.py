"""Pooling, resampling, patch and channel-dropout functions of kael.nn.functional.

The registered ops (kael.max_pool2d_with_indices, avg_pool2d, adaptive_avg_pool2d,
adaptive_max_pool2d, max_unpool2d, _upsample_nearest2d, _upsample_bilinear2d, im2col, col2im) take
every argument spelled out in full; these functions are torch's front ends over them: argument
normalisation (an int for a pair, stride defaulting to kernel_size), the 1-d forms as 2-d ops
over a plane of height 1, and F.interpolate's choice of op and output size
(docs/decisions/pooling.md).
"""
import math
import numbers
import warnings

import kael
from kael._memory_format import _suggested_format

__all__ = ["max_pool1d", "max_pool2d", "max_pool1d_with_indices", "max_pool2d_with_indices", "avg_pool1d",
           "avg_pool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices", "max_unpool1d", "max_unpool2d",
           "interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "unfold", "fold", "dropout1d",
           "dropout2d"]


def _ntuple(value, n, what, op):
    if isinstance(value, (list, tuple)):
        if len(value) == 1:
            return tuple(value) * n
        if len(value) != n:
            raise RuntimeError(f"{op}: {what} must either be a single int, or a tuple of {n} ints")
        return tuple(value)
    return (value,) * n


_TORCH_TYPE_NAMES = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long",
                     "float16": "Half", "bfloat16": "BFloat16", "float32": "Float", "float64": "Double"}


def _check_dtype(op, input, integers=False):
    """torch's NotImplementedError for a dtype its kernel lacks: `integers` is True (every integer
    dtype), "int64" (that one) or False (floating dtypes only)."""
    dtype = input.dtype
    if dtype.is_floating_point or (integers is True and dtype is not kael.bool) or \
            (integers == "int64" and dtype is kael.int64):
        return
    name = str(dtype).rsplit(".", 1)[-1]
    raise NotImplementedError(f'{op}: not implemented for dtype {name} ("{op}" not implemented for '
                              f"'{_TORCH_TYPE_NAMES.get(name, name)}')")


def _pair(value, what, op):
    return _ntuple(value, 2, what, op)


def _single(value, what, op):
    (v,) = _ntuple(value, 1, what, op)
    return v


# ---------------------------------------------------------------- max pooling


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    """max_pool2d returning (output, indices) (indices flat h * W + w in each plane)."""
    op = "max_pool2d"
    _check_dtype(op, input, True)
    k = _pair(kernel_size, "kernel_size", op)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else _pair(stride, "stride", op)
    return kael.max_pool2d_with_indices(input, k, s, _pair(padding, "padding", op), _pair(dilation, "dilation", op),
                                        bool(ceil_mode))


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """The largest element of each window over the last two dims of a (C, H, W) or (N, C, H, W) input."""
    out, indices = max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return (out, indices) if return_indices else out


def _pool1d_geometry(op, input, kernel_size, stride, padding, dilation, ceil_mode):
    """Checks a 1-d pooling call as torch does and returns (k, s, p, d) as ints."""
    if input.dim() not in (2, 3) or any(n == 0 for n in input.shape[-1 if input.dim() == 2 else 1:]) \
            or (input.dim() == 2 and input.shape[0] == 0):
        raise RuntimeError(f"{op}: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for input, "
                           f"but got:{list(input.shape)}")
    k = _single(kernel_size, "kernel_size", op)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else \
        _single(stride, "stride", op)
    p = _single(padding, "padding", op)
    d = _single(dilation, "dilation", op)
    if k <= 0:
        raise RuntimeError(f"{op}: kernel_size must be greater than zero, but got {k}")
    if s <= 0:
        raise RuntimeError(f"{op}: stride must be greater than zero, but got {s}")
    if p < 0:
        raise RuntimeError(f"{op}: padding must be non-negative, but got {p}")
    if d <= 0:
        raise RuntimeError(f"{op}: dilation must be greater than zero, but got {d}")
    if p > (d * (k - 1) + 1) // 2:
        raise RuntimeError(f"{op}: pad should be at most half of effective kernel size, but got pad={p}, "
                           f"kernel_size={k} and dilation={d}")
    length = input.shape[-1]
    num = length + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= length + p:
        out -= 1
    if out < 1:
        raise RuntimeError(f"{op}: Given input size: ({input.shape[-2]}x1x{length}). Calculated output size: "
                           f"({input.shape[-2]}x1x{out}). Output size is too small")
    return k, s, p, d


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    """max_pool1d returning (output, indices)."""
    _check_dtype("max_pool1d", input, True)
    k, s, p, d = _pool1d_geometry("max_pool1d", input, kernel_size, stride, padding, dilation, ceil_mode)
    out, indices = kael.max_pool2d_with_indices(input.unsqueeze(-2), (1, k), (1, s), (0, p), (1, d), bool(ceil_mode))
    return out.squeeze(-2), indices.squeeze(-2)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """The largest element of each window over the last dim of a (C, L) or (N, C, L) input."""
    out, indices = max_pool1d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return (out, indices) if return_indices else out


# ---------------------------------------------------------------- average pooling


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """The mean of each window over the last two dims of a (C, H, W) or (N, C, H, W) input."""
    op = "avg_pool2d"
    _check_dtype(op, input, "int64")
    if input.dim() < 3:  # torch reads input.size(-3) first
        raise IndexError(f"{op}: Dimension out of range (expected to be in range of [{-max(input.dim(), 1)}, "
                         f"{max(input.dim(), 1) - 1}], but got -3)")
    k = _pair(kernel_size, "kernel_size", op)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else _pair(stride, "stride", op)
    return kael.avg_pool2d(input, k, s, _pair(padding, "padding", op), bool(ceil_mode), bool(count_include_pad),
                           divisor_override)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """The mean of each window over the last dim of a (C, L) or (N, C, L) input."""
    _check_dtype("avg_pool1d", input, "int64")
    k, s, p, _ = _pool1d_geometry("avg_pool1d", input, kernel_size, stride, padding, 1, ceil_mode)
    out = kael.avg_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, p), bool(ceil_mode), bool(count_include_pad), None)
    return out.squeeze(-2)


# ---------------------------------------------------------------- adaptive pooling


def _adaptive_size(input, output_size, n, op):
    _check_dtype(op, input)
    size = _ntuple(output_size, n, "output_size", op)
    return tuple(input.shape[input.dim() - n + i] if v is None else v for i, v in enumerate(size))


def adaptive_avg_pool2d(input, output_size):
    """The mean over windows that split the last two dims into output_size parts (None keeps a dim)."""
    if _ntuple(output_size, 2, "output_size", "adaptive_avg_pool2d") == (1, 1):
        # torch's composite computes a 1x1 output as mean over (H, W) (its rounding, any rank),
        # laid out channels-last for a channels-last input (strides (C, 1, C, C), as torch's)
        out = input.mean((-1, -2), keepdim=True)
        if input.dim() == 4 and _suggested_format(input) is kael.channels_last:
            n, c = input.shape[0], input.shape[1]
            out = out.as_strided((n, c, 1, 1), (c, 1, c, c))
        return out
    return kael.adaptive_avg_pool2d(input, _adaptive_size(input, output_size, 2, "adaptive_avg_pool2d"))


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=True):
    """adaptive_max_pool2d returning (output, indices)."""
    return kael.adaptive_max_pool2d(input, _adaptive_size(input, output_size, 2, "adaptive_max_pool2d"))


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """The largest element over windows that split the last two dims into output_size parts."""
    out, indices = adaptive_max_pool2d_with_indices(input, output_size)
    return (out, indices) if return_indices else out


def _check_adaptive1d(op, input):
    _check_dtype(op, input)
    if input.dim() not in (2, 3):
        raise RuntimeError(f"{op}: Expected 2D or 3D tensor, but got {list(input.shape)}")


def adaptive_avg_pool1d(input, output_size):
    """The mean over windows that split the last dim into output_size parts."""
    _check_adaptive1d("adaptive_avg_pool1d", input)
    size = _single(output_size, "output_size", "adaptive_avg_pool1d")
    return kael.adaptive_avg_pool2d(input.unsqueeze(-2), (1, size)).squeeze(-2)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=True):
    """adaptive_max_pool1d returning (output, indices)."""
    _check_adaptive1d("adaptive_max_pool1d", input)
    size = _single(output_size, "output_size", "adaptive_max_pool1d")
    out, indices = kael.adaptive_max_pool2d(input.unsqueeze(-2), (1, size))
    return out.squeeze(-2), indices.squeeze(-2)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """The largest element over windows that split the last dim into output_size parts."""
    out, indices = adaptive_max_pool1d_with_indices(input, output_size)
    return (out, indices) if return_indices else out


# ---------------------------------------------------------------- unpooling


def _unpool_output_size(input, kernel_size, stride, padding, output_size, n, op):
    default = [(input.shape[input.dim() - n + i] - 1) * stride[i] + kernel_size[i] - 2 * padding[i] for i in range(n)]
    if output_size is None:
        return tuple(default)
    size = list(output_size)
    if len(size) == n + 2 or (len(size) == n + 1 and input.dim() == n + 1):
        size = size[-n:]
    if len(size) != n:
        raise ValueError(f"{op}: output_size should be a sequence containing {n} or {n + 2} elements, "
                         f"but it has a length of '{len(size)}'")
    for i in range(n):
        lo = default[i] - stride[i]
        hi = default[i] + stride[i]
        if not lo < size[i] < hi:
            raise ValueError(f'{op}: invalid output_size "{size}" (dim {i} must be between {lo} and {hi})')
    return tuple(size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool2d: each element written at its index in a zero tensor of the output size."""
    op = "max_unpool2d"
    _check_dtype(op, input)
    k = _pair(kernel_size, "kernel_size", op)
    s = k if stride is None else _pair(stride, "stride", op)
    p = _pair(padding, "padding", op)
    return kael.max_unpool2d(input, indices, _unpool_output_size(input, k, s, p, output_size, 2, op))


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool1d."""
    op = "max_unpool1d"
    _check_dtype(op, input)
    k = (_single(kernel_size, "kernel_size", op),)
    s = k if stride is None else (_single(stride, "stride", op),)
    p = (_single(padding, "padding", op),)
    (size,) = _unpool_output_size(input, k, s, p, output_size, 1, op)
    return kael.max_unpool2d(input.unsqueeze(-2), indices.unsqueeze(-2), (1, size)).squeeze(-2)


# ---------------------------------------------------------------- resampling

_MODES = "nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact"


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                antialias=False):
    """Resizes the spatial dims of an (N, C, L) or (N, C, H, W) input to size, or by scale_factor, with
    mode 'nearest' (torch's floor rule), 'nearest-exact', 'linear' (3-d), 'bilinear' (4-d) or 'area'."""
    op = "interpolate"
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError(f"{op}: align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    dim = input.dim() - 2
    if size is not None and scale_factor is not None:
        raise ValueError(f"{op}: only one of size or scale_factor should be defined")
    if size is not None:
        scale_factors = None
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(f"{op}: Input and output must have the same number of spatial dimensions, but got "
                                 f"input with spatial dimensions of {list(input.shape[2:])} and output size of {size}. "
                                 "Please provide input tensor in (N, C, d1, d2, ...,dK) format and output size in "
                                 "(o1, o2, ...,oK) format.")
            if not all(isinstance(v, numbers.Integral) for v in size):
                raise TypeError(f"{op}: expected size to be one of int or Tuple[int] or Tuple[int, int] or "
                                f"Tuple[int, int, int], but got size with types {[type(v) for v in size]}")
            output_size = [int(v) for v in size]
        else:
            output_size = [int(size)] * dim
    elif scale_factor is not None:
        output_size = None
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError(f"{op}: Input and scale_factor must have the same number of spatial dimensions, but "
                                 f"got input with spatial dimensions of {list(input.shape[2:])} and scale_factor of "
                                 f"shape {scale_factor}. Please provide input tensor in (N, C, d1, d2, ...,dK) format "
                                 "and scale_factor in (s1, s2, ...,sK) format.")
            scale_factors = [float(v) for v in scale_factor]
        else:
            scale_factors = [float(scale_factor)] * dim
    else:
        raise ValueError(f"{op}: either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError(f"{op}: recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and output_size is None:
        recompute_scale_factor = True
    if recompute_scale_factor:
        output_size = [math.floor(input.shape[i + 2] * scale_factors[i]) for i in range(dim)]
        scale_factors = None
    if antialias:
        raise NotImplementedError(f"{op}: antialias=True is not implemented")
    if output_size is None:  # torch's upsample ops: floor(in * scale), the scale passed on
        output_size = [int(input.shape[i + 2] * scale_factors[i]) for i in range(dim)]
    if mode in ("nearest", "nearest-exact", "linear", "bilinear", "area"):
        _check_dtype(op, input)
    scales = list(scale_factors) if scale_factors is not None else [None] * max(dim, 0)
    if input.dim() == 3 and mode == "nearest":
        return kael._C._upsample_nearest2d(input.unsqueeze(-2), (1, output_size[0]), None, scales[0]).squeeze(-2)
    if input.dim() == 4 and mode == "nearest":
        return kael._C._upsample_nearest2d(input, output_size, scales[0], scales[1])
    if input.dim() == 3 and mode == "nearest-exact":
        return kael._C._upsample_nearest_exact2d(input.unsqueeze(-2), (1, output_size[0]), None, scales[0]).squeeze(-2)
    if input.dim() == 4 and mode == "nearest-exact":
        return kael._C._upsample_nearest_exact2d(input, output_size, scales[0], scales[1])
    if input.dim() == 3 and mode == "area":
        return adaptive_avg_pool1d(input, output_size)
    if input.dim() == 4 and mode == "area":
        return adaptive_avg_pool2d(input, output_size)
    if input.dim() == 3 and mode == "linear":
        return kael._C._upsample_bilinear2d(input.unsqueeze(-2), (1, output_size[0]), align_corners, None,
                                        scales[0]).squeeze(-2)
    if input.dim() == 4 and mode == "bilinear":
        return kael._C._upsample_bilinear2d(input, output_size, align_corners, scales[0], scales[1])
    if input.dim() == 3 and mode == "bilinear":
        raise NotImplementedError(f"{op}: Got 3D input, but bilinear mode needs 4D input")
    if input.dim() == 4 and mode == "linear":
        raise NotImplementedError(f"{op}: Got 4D input, but linear mode needs 3D input")
    if input.dim() in (3, 4) and mode in ("bicubic", "trilinear"):
        raise NotImplementedError(f"{op}: mode '{mode}' is not implemented")
    raise NotImplementedError(f"{op}: Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.dim()}D) "
                              f"for the modes: {_MODES} (got {mode})")


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated spelling of interpolate."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: interpolate(mode='nearest')."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: interpolate(mode='bilinear', align_corners=True)."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---------------------------------------------------------------- patches


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """The sliding blocks of a (C, H, W) or (N, C, H, W) input as columns (im2col)."""
    op = "unfold"
    _check_dtype(op, input)
    if input.dim() < 3:  # torch reads input.size(2) first
        raise IndexError(f"{op}: Dimension out of range (expected to be in range of [{-max(input.dim(), 1)}, "
                         f"{max(input.dim(), 1) - 1}], but got 2)")
    return kael.im2col(input, _pair(kernel_size, "kernel_size", op), _pair(dilation, "dilation", op),
                       _pair(padding, "padding", op), _pair(stride, "stride", op))


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Sums columns of sliding blocks back into an image (col2im, the adjoint of unfold)."""
    op = "fold"
    _check_dtype(op, input)
    return kael.col2im(input, _pair(output_size, "output_size", op), _pair(kernel_size, "kernel_size", op),
                       _pair(dilation, "dilation", op), _pair(padding, "padding", op), _pair(stride, "stride", op))


# ---------------------------------------------------------------- channel dropout


def _feature_dropout(input, p, training, inplace):
    """Zeroes whole channels (dims 0 and 1 pick one) with probability p, the rest scaled by 1 / (1 - p)."""
    if not training or p == 0 or input.numel() == 0:
        return input
    if p == 1:
        result = input * 0
    else:
        mask_shape = list(input.shape[:2]) + [1] * (input.dim() - 2)
        keep = kael.empty(mask_shape, dtype=input.dtype).bernoulli_(1 - p)
        result = input * keep.div_(1 - p)
    if inplace:
        input.copy_(result)
        return input
    return result


def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of a (C, L) or (N, C, L) input with probability p while training."""
    _check_p(p)
    if input.dim() not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.dim()}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
                           "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    if input.dim() == 2:
        result = _feature_dropout(input.unsqueeze(0), p, training, inplace)
        return input if inplace else result.squeeze(0)
    return _feature_dropout(input, p, training, inplace)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of an (N, C, H, W) input with probability p while training (a 3-d input is read
    as (N, C, L), with torch's warning)."""
    _check_p(p)
    ndim = input.dim()
    if ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {ndim}-D input to dropout2d, which is deprecated and will result in an "
                      "error in a future release. To retain the behavior and silence this warning, please use dropout "
                      "instead. Note that dropout2d exists to provide channel-wise dropout on inputs with 2 spatial "
                      "dimensions, a channel dimension, and an optional batch dimension (i.e. 3D or 4D inputs).",
                      stacklevel=2)
    if ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior "
                      "is desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior "
                      "will change in a future release to interpret the input as one without a batch dimension, i.e. "
                      "shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please switch to using "
                      "dropout1d instead.", stacklevel=2)
    return _feature_dropout(input, p, training, inplace)
