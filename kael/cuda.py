"""kael.cuda: what PyTorch code asks of torch.cuda before it moves tensors to a GPU."""
from __future__ import annotations

from kael import _C

__all__ = ["device_count", "is_available"]


def is_available() -> bool:
    """Whether this build of kael has a CUDA backend (False on a CPU-only build)."""
    return bool(_C.cuda_is_available())


def device_count() -> int:
    """The number of CUDA devices kael can use: 0 without a CUDA backend, else 1 (kael drives
    one device, cuda:0)."""
    return 1 if is_available() else 0
