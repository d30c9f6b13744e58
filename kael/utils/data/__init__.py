"""kael.utils.data: the path PyTorch code imports its data tools from
(`from torch.utils.data import DataLoader`); the same objects as kael.data. Laid out as
torch.utils.data: dataset, sampler, dataloader and distributed (DistributedSampler) modules."""
from kael.data import *  # noqa: F401,F403
from kael.data import __all__  # noqa: F401
from kael.utils.data import dataloader, dataset, distributed, sampler  # noqa: F401,E402
from kael.utils.data.distributed import DistributedSampler  # noqa: F401,E402
