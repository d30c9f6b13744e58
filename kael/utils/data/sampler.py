"""kael.utils.data.sampler: the samplers (torch.utils.data.sampler's names), from kael.data."""
from kael.data import (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,  # noqa: F401
                       WeightedRandomSampler)
