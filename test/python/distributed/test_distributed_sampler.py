"""kael.utils.data.distributed.DistributedSampler against torch's, num_replicas and rank given:
the same indices in every configuration (torch's shuffle draws its permutation with torch.randperm,
kael's with kael.randperm: the test gives torch's sampler kael's permutation, so what is compared
is everything else: padding, drop_last, the per-rank stride, the seed + epoch seeding)."""
import pytest
import torch
import torch.utils.data.distributed as tdist

import kael
import kael.utils.data as kdata
from kael.utils.data.distributed import DistributedSampler


def kael_perm(n, seed):
    g = kael.Generator()
    g.manual_seed(seed)
    return kael.randperm(n, generator=g).tolist()


@pytest.mark.parametrize("n", [1, 5, 10, 11, 16, 17, 3])
@pytest.mark.parametrize("replicas", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [False, True])
def test_indices_match_torch(monkeypatch, n, replicas, shuffle, drop_last):
    data = list(range(n))
    real_randperm = torch.randperm

    def randperm_from_kael(m, generator=None, **kw):
        return torch.tensor(kael_perm(m, generator.initial_seed()), dtype=torch.int64)

    monkeypatch.setattr(torch, "randperm", randperm_from_kael)
    try:
        for seed in (0, 3):
            for epoch in (0, 1, 5):
                union = []
                for rank in range(replicas):
                    k = DistributedSampler(data, num_replicas=replicas, rank=rank, shuffle=shuffle, seed=seed,
                                           drop_last=drop_last)
                    t = tdist.DistributedSampler(data, num_replicas=replicas, rank=rank, shuffle=shuffle, seed=seed,
                                                 drop_last=drop_last)
                    k.set_epoch(epoch)
                    t.set_epoch(epoch)
                    got = list(k)
                    assert got == list(t), (rank, got, list(t))
                    assert len(k) == len(t) == len(got)
                    union += got
                if not drop_last:
                    assert set(union) == set(data)
    finally:
        monkeypatch.setattr(torch, "randperm", real_randperm)


def test_shuffle_depends_on_seed_and_epoch_only():
    data = list(range(50))
    a = DistributedSampler(data, num_replicas=2, rank=0, seed=1)
    b = DistributedSampler(data, num_replicas=2, rank=0, seed=1)
    assert list(a) == list(b)
    a.set_epoch(1)
    assert list(a) != list(b)
    b.set_epoch(1)
    assert list(a) == list(b)
    assert list(DistributedSampler(data, num_replicas=2, rank=0, seed=2)) != list(
        DistributedSampler(data, num_replicas=2, rank=0, seed=1))
    # the ranks of one epoch split one permutation
    r0 = DistributedSampler(data, num_replicas=2, rank=0, seed=1)
    r1 = DistributedSampler(data, num_replicas=2, rank=1, seed=1)
    assert sorted(list(r0) + list(r1)) == data


def test_bad_rank_and_loader_use():
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval \[0, 1\]"):
        DistributedSampler(list(range(4)), num_replicas=2, rank=2)
    with pytest.raises(RuntimeError, match="init_process_group"):
        DistributedSampler(list(range(4)))  # no process group: torch's error too
    ds = kdata.TensorDataset(kael.arange(10))
    s = DistributedSampler(ds, num_replicas=2, rank=1, shuffle=False)
    batches = [b[0].tolist() for b in kdata.DataLoader(ds, batch_size=2, sampler=s)]
    assert batches == [[1, 3], [5, 7], [9]]


def test_package_layout_matches_torch():
    import kael.data
    assert kdata.__all__ == kael.data.__all__
    for name in kael.data.__all__:
        assert getattr(kdata, name) is getattr(kael.data, name)
    from kael.utils.data.dataloader import DataLoader
    from kael.utils.data.dataset import Dataset, TensorDataset
    from kael.utils.data.sampler import RandomSampler, Sampler
    assert DataLoader is kael.data.DataLoader and Dataset is kael.data.Dataset
    assert TensorDataset is kael.data.TensorDataset and Sampler is kael.data.Sampler
    assert RandomSampler is kael.data.RandomSampler
    assert kdata.DistributedSampler is DistributedSampler
