"""kael.backends: the switches torch.backends offers for its backends, with torch's defaults.

kael runs on the CPU (oneDNN for products and convolutions): the CUDA, cuDNN and MPS switches
hold what is assigned to them and report "not available"; none of them changes what kael's
kernels compute (docs/decisions/namespaces.md)."""
from kael.backends import cpu, cuda, cudnn, mkldnn, mps, opt_einsum  # noqa: F401

__all__ = ["cpu", "cuda", "cudnn", "mkldnn", "mps", "opt_einsum"]
