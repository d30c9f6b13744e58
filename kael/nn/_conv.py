"""Convolution functions of kael.nn.functional: front ends over the registered ops kael.conv1d,
kael.conv2d, kael.conv_transpose1d and kael.conv_transpose2d (docs/decisions/convolution.md)."""
from kael import _C

__all__ = ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d"]


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-d convolution of a (N, C_in, L) or (C_in, L) input with a (C_out, C_in / groups, k) weight;
    padding is an int, a 1-tuple, 'valid' or 'same' (as torch.nn.functional.conv1d)."""
    return _C.conv1d(input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-d convolution of a (N, C_in, H, W) or (C_in, H, W) input with a (C_out, C_in / groups, kH, kW)
    weight; padding is an int, a pair, 'valid' or 'same' (as torch.nn.functional.conv2d)."""
    return _C.conv2d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """1-d transposed convolution with a (C_in, C_out / groups, k) weight (as
    torch.nn.functional.conv_transpose1d)."""
    return _C.conv_transpose1d(input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """2-d transposed convolution with a (C_in, C_out / groups, kH, kW) weight (as
    torch.nn.functional.conv_transpose2d)."""
    return _C.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)
