"""kael.nn: neural-network building blocks, as torch.nn.

Module and the layers are pure Python over kael's ops (kael.nn.functional holds the stateless
ops, with the fused C++ kernels behind layer_norm, cross_entropy and attention).
"""
from kael.nn import functional  # noqa: F401
from kael.nn import init  # noqa: F401
from kael.nn.modules import *  # noqa: F401,F403
from kael.nn.modules import __all__ as _modules_all
from kael.nn.parameter import Parameter  # noqa: F401
from kael.nn import utils  # noqa: F401
from kael.nn import parallel  # noqa: F401  (DistributedDataParallel)

__all__ = ["Parameter", "functional", "init", "parallel", "utils"] + _modules_all
