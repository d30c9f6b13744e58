"""kael.nn.parallel: DistributedDataParallel (torch.nn.parallel's, on kael.distributed)."""
from kael.nn.parallel.distributed import DistributedDataParallel

DDP = DistributedDataParallel

__all__ = ["DistributedDataParallel"]
