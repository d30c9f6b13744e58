"""kael.utils.data: the path PyTorch code imports its data tools from
(`from torch.utils.data import DataLoader`); the same objects as kael.data."""
from kael.data import *  # noqa: F401,F403
from kael.data import __all__  # noqa: F401
