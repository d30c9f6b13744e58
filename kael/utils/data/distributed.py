"""kael.utils.data.distributed: DistributedSampler, torch.utils.data.distributed's."""
import math

import kael
from kael.data import Sampler


class DistributedSampler(Sampler):
    """The part of the dataset's indices that rank `rank` of `num_replicas` reads, as torch's:
    the indices (a kael.randperm seeded with seed + epoch when shuffle, else in order) are padded
    by repeating them from the start to a multiple of num_replicas (or cut to one with
    drop_last), and rank r takes every num_replicas-th from r. Every rank must use the same seed;
    call set_epoch(epoch) before each epoch for a new order. num_replicas and rank default to the
    default process group's."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None or rank is None:
            import kael.distributed as dist
            if not dist.is_available():
                raise RuntimeError("Requires distributed package to be available")
            if num_replicas is None:
                num_replicas = dist.get_world_size()
            if rank is None:
                rank = dist.get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        if self.drop_last and len(self.dataset) % self.num_replicas != 0:
            self.num_samples = math.ceil((len(self.dataset) - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(len(self.dataset) / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        if self.shuffle:
            g = kael.Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = kael.randperm(len(self.dataset), generator=g).tolist()
        else:
            indices = list(range(len(self.dataset)))
        if not self.drop_last:
            padding_size = self.total_size - len(indices)
            if padding_size <= len(indices):
                indices += indices[:padding_size]
            else:
                indices += (indices * math.ceil(padding_size / len(indices)))[:padding_size]
        else:
            indices = indices[:self.total_size]
        assert len(indices) == self.total_size
        indices = indices[self.rank:self.total_size:self.num_replicas]
        assert len(indices) == self.num_samples
        return iter(indices)

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The epoch the next iteration shuffles for (all ranks: the same permutation per epoch)."""
        self.epoch = epoch
