"""Pooling, resampling, patch and channel-dropout layers (torch.nn's, with their printouts)."""
from kael.nn import _pooling as P
from kael.nn.modules.module import Module

__all__ = ["MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
           "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "MaxUnpool1d", "MaxUnpool2d", "Upsample", "UpsamplingNearest2d",
           "UpsamplingBilinear2d", "Unfold", "Fold", "Dropout1d", "Dropout2d"]


def _tuple(value, n):
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,) * n


class _MaxPoolNd(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """The largest element of each window over the last dim of a (C, L) or (N, C, L) input."""

    def forward(self, input):
        return P.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class MaxPool2d(_MaxPoolNd):
    """The largest element of each window over the last two dims of a (C, H, W) or (N, C, H, W) input."""

    def forward(self, input):
        return P.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool1d(Module):
    """The mean of each window over the last dim of a (C, L) or (N, C, L) input."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        self.kernel_size = _tuple(kernel_size, 1)
        self.stride = _tuple(stride if stride is not None else kernel_size, 1)
        self.padding = _tuple(padding, 1)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input):
        return P.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class AvgPool2d(Module):
    """The mean of each window over the last two dims of a (C, H, W) or (N, C, H, W) input."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input):
        return P.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class _AdaptivePool(Module):
    def __init__(self, output_size, return_indices=None):
        super().__init__()
        self.output_size = output_size
        if return_indices is not None:
            self.return_indices = return_indices

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePool):
    """The mean over windows that split the last dim into output_size parts."""

    def __init__(self, output_size):
        super().__init__(output_size)

    def forward(self, input):
        return P.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool2d(_AdaptivePool):
    """The mean over windows that split the last two dims into output_size parts (None keeps a dim)."""

    def __init__(self, output_size):
        super().__init__(output_size)

    def forward(self, input):
        return P.adaptive_avg_pool2d(input, self.output_size)


class AdaptiveMaxPool1d(_AdaptivePool):
    """The largest element over windows that split the last dim into output_size parts."""

    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size, return_indices)

    def forward(self, input):
        return P.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(_AdaptivePool):
    """The largest element over windows that split the last two dims into output_size parts."""

    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size, return_indices)

    def forward(self, input):
        return P.adaptive_max_pool2d(input, self.output_size, self.return_indices)


class _MaxUnpool(Module):
    n = 2

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = _tuple(kernel_size, self.n)
        self.stride = _tuple(stride if stride is not None else kernel_size, self.n)
        self.padding = _tuple(padding, self.n)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpool):
    """The inverse of MaxPool1d (given its indices)."""
    n = 1

    def forward(self, input, indices, output_size=None):
        return P.max_unpool1d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class MaxUnpool2d(_MaxUnpool):
    """The inverse of MaxPool2d (given its indices)."""
    n = 2

    def forward(self, input, indices, output_size=None):
        return P.max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class Upsample(Module):
    """Resizes the spatial dims to size or by scale_factor (F.interpolate)."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(factor) for factor in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return P.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        if self.scale_factor is not None:
            info = "scale_factor=" + repr(self.scale_factor)
        else:
            info = "size=" + repr(self.size)
        return info + ", mode=" + repr(self.mode)


class UpsamplingNearest2d(Upsample):
    """Upsample with mode 'nearest'."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Upsample with mode 'bilinear' and align_corners=True."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class Unfold(Module):
    """The sliding blocks of a (C, H, W) or (N, C, H, W) input as columns (F.unfold)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        return P.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")


class Fold(Module):
    """Sums columns of sliding blocks back into an image of output_size (F.fold)."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        return P.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class _ChannelDropout(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_ChannelDropout):
    """Zeroes whole channels of a (C, L) or (N, C, L) input with probability p in training mode."""

    def forward(self, input):
        return P.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_ChannelDropout):
    """Zeroes whole channels of an (N, C, H, W) input with probability p in training mode."""

    def forward(self, input):
        return P.dropout2d(input, self.p, self.training, self.inplace)
