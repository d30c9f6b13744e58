"""kael.utils.data.dataset: the datasets (torch.utils.data.dataset's names), from kael.data."""
from kael.data import (ChainDataset, ConcatDataset, Dataset, IterableDataset, StackDataset, Subset,  # noqa: F401
                       TensorDataset, random_split)
