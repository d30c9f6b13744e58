"""Activation, normalisation, padding and distance modules: thin wrappers over
kael.nn.functional, as torch.nn's."""
import warnings

import kael
from kael.nn import functional as F
from kael.nn import init
from kael.nn.modules.layers import Softmax, _affine_parameters, _reset_affine
from kael.nn.modules.module import Module
from kael.nn.parameter import Parameter


def _inplace_repr(module, text=""):
    parts = [text] if text else []
    if getattr(module, "inplace", False):
        parts.append("inplace=True")
    return ", ".join(parts)


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return _inplace_repr(self, f"negative_slope={self.negative_slope}")


class ELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return _inplace_repr(self, f"alpha={self.alpha}")


class CELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return _inplace_repr(self, f"alpha={self.alpha}")


class SELU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.selu(input, self.inplace)

    def extra_repr(self):
        return _inplace_repr(self)


class Hardtanh(Module):
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False, min_value=None, max_value=None):
        super().__init__()
        # torch's old keyword names, deprecated there with this warning
        if min_value is not None:
            warnings.warn("keyword argument `min_value` is deprecated and renamed to `min_val`", FutureWarning,
                          stacklevel=2)
            min_val = min_value
        if max_value is not None:
            warnings.warn("keyword argument `max_value` is deprecated and renamed to `max_val`", FutureWarning,
                          stacklevel=2)
            max_val = max_value
        if min_val > max_val:
            raise ValueError("min_val cannot be greater than max_val")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return _inplace_repr(self, f"min_val={self.min_val}, max_val={self.max_val}")


class ReLU6(Hardtanh):
    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return _inplace_repr(self)


class Hardsigmoid(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.hardsigmoid(input, self.inplace)


class Hardswish(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.hardswish(input, self.inplace)


class Mish(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.mish(input, self.inplace)


class LogSigmoid(Module):
    def forward(self, input):
        return F.logsigmoid(input)


class Softsign(Module):
    def forward(self, input):
        return F.softsign(input)


class Tanhshrink(Module):
    def forward(self, input):
        return F.tanhshrink(input)


class Softshrink(Module):
    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.softshrink(input, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class Hardshrink(Softshrink):
    def forward(self, input):
        return F.hardshrink(input, self.lambd)


class Threshold(Module):
    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return _inplace_repr(self, f"threshold={self.threshold}, value={self.value}")


class GLU(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmin(Softmax):
    def forward(self, input):
        return F.softmin(input, self.dim, _stacklevel=5)


class Softplus(Module):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class PReLU(Module):
    """leaky ReLU with a learnt slope: one (num_parameters=1) or one per channel, init 0.25."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(kael.empty(num_parameters, dtype=dtype, device=device))
        self.reset_parameters()

    def reset_parameters(self):
        init_ = init.constant_
        init_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class RReLU(Module):
    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return _inplace_repr(self, f"lower={self.lower}, upper={self.upper}")


# ---------------------------------------------------------------- normalisation


class RMSNorm(Module):
    """x / sqrt(mean(x^2 over normalized_shape) + eps) * weight (ones); eps None: the dtype's eps."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(kael.empty(self.normalized_shape, dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        _affine_parameters(self, affine, bias, (num_channels,), dtype, device)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        text = f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"
        return text + (f", bias={self.bias is not None}" if self.affine else "")


class _BatchNorm(Module):
    _dims = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        _affine_parameters(self, affine, bias, (num_features,), dtype, device)
        if track_running_stats:
            self.register_buffer("running_mean", kael.zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", kael.ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", kael.tensor(0, dtype=kael.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        _reset_affine(self)

    def forward(self, input):
        if input.dim() not in self._dims:
            raise ValueError(f"expected {' or '.join(f'{d}D' for d in self._dims)} input (got {input.dim()}D input)")
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked.item())
        use_batch = self.training or not self.track_running_stats
        return F.batch_norm(input, self.running_mean if not self.training or self.track_running_stats else None,
                            self.running_var if not self.training or self.track_running_stats else None,
                            self.weight, self.bias, use_batch, momentum, self.eps)

    def extra_repr(self):
        bias = f"bias={self.bias is not None}, " if self.affine else ""
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, {bias}"
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    _dims = (5,)


# ---------------------------------------------------------------- padding


class _Pad(Module):
    _mode = "constant"
    _n = 1

    def __init__(self, padding, value=None):
        super().__init__()
        self.padding = (padding,) * (2 * self._n) if isinstance(padding, int) else tuple(padding)
        if len(self.padding) != 2 * self._n:
            raise ValueError(f"expected padding of {2 * self._n} values, got {len(self.padding)}")
        self.value = value

    def forward(self, input):
        if self._mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        if self._mode == "constant" and not type(self).__name__.startswith("Zero"):
            return f"padding={self.padding}, value={self.value}"
        return f"{self.padding}"


def _pad_class(name, mode, n, takes_value):
    if takes_value:
        def __init__(self, padding, value):
            _Pad.__init__(self, padding, value)
    elif mode == "constant":
        def __init__(self, padding):
            _Pad.__init__(self, padding, 0.0)
    else:
        def __init__(self, padding):
            _Pad.__init__(self, padding)
    return type(name, (_Pad,), {"_mode": mode, "_n": n, "__init__": __init__, "__module__": __name__})


ConstantPad1d = _pad_class("ConstantPad1d", "constant", 1, True)
ConstantPad2d = _pad_class("ConstantPad2d", "constant", 2, True)
ConstantPad3d = _pad_class("ConstantPad3d", "constant", 3, True)
ZeroPad1d = _pad_class("ZeroPad1d", "constant", 1, False)
ZeroPad2d = _pad_class("ZeroPad2d", "constant", 2, False)
ZeroPad3d = _pad_class("ZeroPad3d", "constant", 3, False)
ReflectionPad1d = _pad_class("ReflectionPad1d", "reflect", 1, False)
ReflectionPad2d = _pad_class("ReflectionPad2d", "reflect", 2, False)
ReplicationPad1d = _pad_class("ReplicationPad1d", "replicate", 1, False)
ReplicationPad2d = _pad_class("ReplicationPad2d", "replicate", 2, False)
CircularPad1d = _pad_class("CircularPad1d", "circular", 1, False)
CircularPad2d = _pad_class("CircularPad2d", "circular", 2, False)


# ---------------------------------------------------------------- shapes and distances


class Unflatten(Module):
    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class CosineSimilarity(Module):
    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


# torch.nn.modules.activation also holds these; kael defines them beside the layers that use them
from kael.nn.modules.layers import GELU, LogSoftmax, ReLU, Sigmoid, SiLU, Tanh  # noqa: E402,F401
from kael.nn.modules.transformer import MultiheadAttention  # noqa: E402,F401
