"""Samplers and DataLoaders draw lazily (Note [Samplers draw lazily] in kael/data/__init__.py):
the first items of a sampler of 10**10 samples come at once and in little memory, in a fresh
interpreter whose address space is capped (RLIMIT_AS), so a sampler that draws every index up
front fails with MemoryError instead of swapping. RandomSampler draws as torch's sampler.py
does (the same calls on its generator, a generator of its own seeded from the default one when it
has none); lengths, value ranges and distributions are compared with torch's samplers, and the
same seed gives the same indices in kael."""
import itertools
import json
import os
import subprocess
import sys
import threading

import pytest
import torch
import torch.utils.data as tdata

import kael
from kael import data

N = 10 ** 10

# name -> (sampler or loader, built from D = kael.data or torch.utils.data and Huge, a dataset of
# N samples whose sample i is i; how many items to take; what they must be)
LAZY_CASES = {
    "random-replacement": "D.RandomSampler(range(10), replacement=True, num_samples=N)",
    "random-replacement-generator": "D.RandomSampler(range(10), replacement=True, num_samples=N, "
                                    "generator=kael.Generator().manual_seed(3))",
    "random-more-than-len": "D.RandomSampler(range(10), num_samples=N)",
    "weighted-replacement": "D.WeightedRandomSampler([1.0, 0.0, 3.0, 2.0], N)",
    "sequential": "D.SequentialSampler(Huge())",
    "batch": "D.BatchSampler(D.RandomSampler(range(10), replacement=True, num_samples=N), 7, False)",
    "batch-drop-last": "D.BatchSampler(D.WeightedRandomSampler([1.0, 2.0], N), 7, True)",
    "batch-of-sequential": "D.BatchSampler(D.SequentialSampler(Huge()), 5, True)",
    "loader-sampler": "D.DataLoader(Huge(), batch_size=4, sampler=D.RandomSampler(Huge(), replacement=True, "
                      "num_samples=N))",
    "loader-sequential": "D.DataLoader(Huge(), batch_size=4)",
    "loader-no-batching": "D.DataLoader(Huge(), batch_size=None, sampler=D.RandomSampler(range(10), "
                          "replacement=True, num_samples=N))",
    "loader-weighted": "D.DataLoader(Huge(), batch_size=3, sampler=D.WeightedRandomSampler([1.0, 1.0], N))",
    "loader-workers": "D.DataLoader(Huge(), batch_size=4, num_workers=2, sampler=Counting(D.RandomSampler(Huge(), "
                      "replacement=True, num_samples=N)))",
    "loader-workers-batch-sampler": "D.DataLoader(Huge(), num_workers=2, prefetch_factor=1, batch_sampler="
                                    "Counting(D.BatchSampler(D.SequentialSampler(Huge()), 2, False)))",
}

SCRIPT = r"""
import itertools, json, resource, sys
import kael
import kael.data as D

N = 10 ** 10

class Huge(D.Dataset):
    def __getitem__(self, i):
        return i
    def __len__(self):
        return N

class Counting(D.Sampler):
    # the items the loader has taken from a sampler
    def __init__(self, inner):
        self.inner, self.drawn = inner, 0
    def __iter__(self):
        for item in self.inner:
            self.drawn += 1
            yield item
    def __len__(self):
        return len(self.inner)

def as_list(x):
    return x.tolist() if isinstance(x, kael.Tensor) else [as_list(v) for v in x] if isinstance(x, list) else x

# warm up what the cases use (kernels, threads, allocator), then cap the address space at what
# the process maps now and 512 MiB more: 10**10 indices would need 80 GB
list(itertools.islice(D.DataLoader(Huge(), batch_size=2, num_workers=2), 2))
with open("/proc/self/status") as f:
    vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (vm + (512 << 20), resource.getrlimit(resource.RLIMIT_AS)[1]))

results = {}
for name, make in json.loads(sys.argv[1]).items():
    try:
        obj = eval(make)
        it = iter(obj)
        taken = [as_list(x) for x in itertools.islice(it, 40)]
        drawn = getattr(getattr(obj, "sampler", None), "drawn", None) or \
            getattr(getattr(obj, "batch_sampler", None), "drawn", None)
        if hasattr(it, "close"):
            it.close()
        results[name] = {"taken": taken, "len": len(obj), "drawn": drawn,
                         "depth": getattr(obj, "prefetch_factor", None) and obj.prefetch_factor * obj.num_workers}
    except BaseException as e:
        results[name] = {"error": f"{type(e).__name__}: {e}"}
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def lazy_results():
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(LAZY_CASES)], capture_output=True, text=True,
                          timeout=300 * float(os.environ.get("KAEL_TEST_TIMEOUT_FACTOR", "1")))
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


class Huge(tdata.Dataset):
    def __getitem__(self, i):
        return i

    def __len__(self):
        return N


def torch_len(name):
    """The length of torch's sampler or loader of the case (torch builds them lazily too)."""
    class Counting(tdata.Sampler):
        def __init__(self, inner):
            self.inner = inner

        def __len__(self):
            return len(self.inner)
    return len(eval(LAZY_CASES[name], {"D": tdata, "N": N, "Huge": Huge, "Counting": Counting, "kael": torch}))


def flat(items):
    return [v for item in items for v in (flat(item) if isinstance(item, list) else [item])]


@pytest.mark.parametrize("name", sorted(LAZY_CASES))
def test_first_items_of_10_to_the_10_samples_come_lazily(lazy_results, name):
    result = lazy_results[name]
    assert "error" not in result, result.get("error")
    taken = result["taken"]
    assert len(taken) == 40
    assert result["len"] == torch_len(name)
    values = flat(taken)
    if name.startswith(("random", "loader-no-batching")) or name == "batch":
        assert set(values) <= set(range(10)) and len(set(values)) > 1
    if name == "random-more-than-len":
        assert sorted(values[:10]) == sorted(values[10:20]) == list(range(10))  # whole permutations first
    if "weighted" in name:
        support = {0, 2, 3} if name == "weighted-replacement" else {0, 1}
        assert set(values) == support
    if name in ("sequential", "batch-of-sequential", "loader-sequential", "loader-workers-batch-sampler"):
        assert values == list(range(len(values)))
    if name.startswith("batch") or name.startswith("loader") and name != "loader-no-batching":
        size = {"batch": 7, "batch-drop-last": 7, "batch-of-sequential": 5, "loader-workers-batch-sampler": 2}.get(name, 4)
        size = 3 if name == "loader-weighted" else size
        assert all(len(item) == size for item in taken)
    if result["depth"]:
        # the workers take at most prefetch_factor * num_workers batches beyond those yielded
        per_draw = 1 if name.endswith("batch-sampler") else 4
        assert result["drawn"] <= (40 + result["depth"]) * per_draw, result


def generator_calls(generator):
    """How many calls have drawn from a kael generator (its Philox offset: one per call)."""
    return int.from_bytes(bytes(generator.get_state().tolist()[8:]), "little")


def torch_calls(make, take=None):
    """How many calls torch's sampler makes to torch.randint / torch.randperm / torch.multinomial
    while it is iterated (take items, or all)."""
    counts = {"n": 0}
    originals = {name: getattr(torch, name) for name in ("randint", "randperm", "multinomial")}

    def counting(original):
        def call(*args, **kwargs):
            counts["n"] += 1
            return original(*args, **kwargs)
        return call
    try:
        for name, original in originals.items():
            setattr(torch, name, counting(original))
        list(itertools.islice(make(tdata, torch.Generator().manual_seed(0)), take))
    finally:
        for name, original in originals.items():
            setattr(torch, name, original)
    return counts["n"]


@pytest.mark.parametrize("make", [
    lambda D, g: D.RandomSampler(range(10), replacement=True, num_samples=70, generator=g),
    lambda D, g: D.RandomSampler(range(10), replacement=True, num_samples=64, generator=g),
    lambda D, g: D.RandomSampler(range(10), replacement=True, num_samples=5, generator=g),
    lambda D, g: D.RandomSampler(range(10), generator=g),
    lambda D, g: D.RandomSampler(range(10), num_samples=25, generator=g),
    lambda D, g: D.RandomSampler(range(10), num_samples=30, generator=g),
    lambda D, g: D.RandomSampler(range(10), num_samples=3, generator=g),
    lambda D, g: D.WeightedRandomSampler([1.0, 2.0, 3.0], 500, generator=g),
    lambda D, g: D.WeightedRandomSampler([1.0, 2.0, 3.0], 2, replacement=False, generator=g),
    lambda D, g: D.SubsetRandomSampler([4, 8, 1], generator=g),
], ids=["replacement-70", "replacement-64", "replacement-5", "permutation", "permutations-25", "permutations-30",
        "part-of-one", "weighted", "weighted-no-replacement", "subset"])
def test_samplers_make_torchs_calls_on_their_generator(make):
    generator = kael.Generator().manual_seed(0)
    sampler = make(data, generator)
    items = list(sampler)
    assert len(items) == len(make(tdata, None))
    assert generator_calls(generator) == torch_calls(make)
    # mid-way: the calls of the items taken so far (a chunk of 32 at a time with replacement)
    if isinstance(sampler, data.RandomSampler):
        generator.manual_seed(0)
        assert list(itertools.islice(iter(sampler), 33)) == items[:33]
        assert generator_calls(generator) == torch_calls(make, 33)


def test_random_sampler_without_a_generator_seeds_its_own_from_the_default_one():
    # torch: one draw from the default generator as iteration starts; what else draws from it
    # between items does not change the order
    for D, lib in ((data, kael), (tdata, torch)):
        for make in (lambda: D.RandomSampler(range(10), num_samples=35),
                     lambda: D.RandomSampler(range(10), replacement=True, num_samples=100)):
            lib.manual_seed(4)
            plain = list(make())
            lib.manual_seed(4)
            it = iter(make())
            interleaved = []
            for item in it:
                interleaved.append(item)
                lib.rand(3)
            assert interleaved == plain, lib.__name__
            lib.manual_seed(4)
            assert list(make()) == plain
    before = generator_calls(kael.default_generator)
    it = iter(data.RandomSampler(range(10), replacement=True, num_samples=N))
    assert generator_calls(kael.default_generator) == before
    next(it)  # the draw happens as iteration starts, as torch's generator function does
    list(itertools.islice(it, 100))
    assert generator_calls(kael.default_generator) == before + 1


@pytest.mark.parametrize("make", [
    lambda D, g: D.RandomSampler(range(10), replacement=True, num_samples=1000, generator=g),
    lambda D, g: D.RandomSampler(range(7), num_samples=100, generator=g),
    lambda D, g: D.WeightedRandomSampler([1.0, 2.0, 3.0], 70000, generator=g),
    lambda D, g: D.BatchSampler(D.RandomSampler(range(5), replacement=True, num_samples=99, generator=g), 4, True),
    lambda D, g: D.SubsetRandomSampler(range(3, 40, 3), generator=g),
], ids=["replacement", "permutations", "weighted", "batches", "subset"])
def test_same_seed_same_indices_and_torchs_ranges_and_distribution(make):
    def seeded(seed):
        return list(make(data, kael.Generator().manual_seed(seed)))
    first = seeded(1)
    assert seeded(1) == first and seeded(2) != first
    theirs = list(make(tdata, torch.Generator().manual_seed(1)))
    assert len(first) == len(theirs)
    ours, theirs = flat(first), flat(theirs)
    assert sorted(set(ours)) == sorted(set(theirs))
    # the frequency of each index, kael's and torch's, within 4 standard deviations of the other
    for value in set(theirs):
        p = theirs.count(value) / len(theirs)
        sd = (p * (1 - p) / len(theirs)) ** 0.5
        assert abs(ours.count(value) / len(ours) - p) <= 4 * 2 ** 0.5 * sd + 1e-12, value


def test_weighted_random_sampler_chunks_keep_the_weights():
    # more than one multinomial call (chunks of 65536): zero weights stay out, the rest by weight
    draws = list(data.WeightedRandomSampler([2.0, 0.0, 6.0, 0.0], 150000, generator=kael.Generator().manual_seed(8)))
    assert len(draws) == 150000 and set(draws) == {0, 2}
    p = draws.count(2) / len(draws)
    assert abs(p - 0.75) < 4 * (0.75 * 0.25 / len(draws)) ** 0.5
    # bad weights fail at the first item, as torch's, with torch's class
    sampler = data.WeightedRandomSampler([1.0, -1.0], N)
    it = iter(sampler)
    with pytest.raises(RuntimeError, match="multinomial: probability tensor contains"):
        next(it)


def test_shuffled_loader_draws_the_random_sampler_s_order_epoch_after_epoch():
    # the TensorDataset fast path draws as RandomSampler does: the same order in every epoch
    # (each takes the generator as far), also without a generator of its own
    ds = data.TensorDataset(kael.arange(12))
    generator = kael.Generator().manual_seed(5)
    loader = data.DataLoader(ds, batch_size=12, shuffle=True, generator=generator)
    fast = [next(iter(loader))[0].tolist() for _ in range(3)]
    sampler = data.RandomSampler(range(12), generator=generator.manual_seed(5))
    assert fast == [list(sampler) for _ in range(3)]
    kael.manual_seed(6)
    fast = [next(iter(data.DataLoader(ds, batch_size=12, shuffle=True)))[0].tolist() for _ in range(2)]
    kael.manual_seed(6)
    assert fast == [list(data.RandomSampler(range(12))) for _ in range(2)]


def test_workers_take_no_more_batches_than_prefetch_while_one_is_late():
    # Batch 0 is late; the other worker finishes batch 1, which waits for its turn. Batches sent
    # and not yet yielded, waiting ones included, stay at prefetch_factor * num_workers (2): a
    # third batch is drawn only after batch 0 is yielded. Batch 0 waits until a third batch is
    # drawn (which a loader that does not count the waiting batches does as batch 1 comes back),
    # or for at most a second after batch 1 is done.
    drawn = []
    yielded = []
    too_early = threading.Event()
    batch_1_done = threading.Event()

    class Tickets(data.Sampler):
        def __iter__(self):
            for i in range(6):
                if i >= 2 and not yielded:
                    too_early.set()
                drawn.append(i)
                yield i

        def __len__(self):
            return 6

    class Late(data.Dataset):
        def __getitem__(self, i):
            if i == 0:
                assert batch_1_done.wait(60)
                too_early.wait(1.0)
            return i

        def __len__(self):
            return 6

    def collate(batch):
        if batch == [1]:
            batch_1_done.set()
        return batch

    loader = data.DataLoader(Late(), sampler=Tickets(), collate_fn=collate, num_workers=2, prefetch_factor=1)
    for batch in loader:
        yielded.append(batch)
    assert yielded == [[i] for i in range(6)]
    assert not too_early.is_set(), "a third batch was drawn while batch 0 was late"


def test_random_sampler_of_an_empty_dataset_fails_as_torch_s():
    for D in (data, tdata):
        with pytest.raises(ValueError, match="num_samples should be a positive integer value"):
            D.RandomSampler(range(0))
