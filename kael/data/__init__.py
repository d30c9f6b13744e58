"""kael.data: datasets, samplers, batching (in the calling thread, or in worker threads with
num_workers > 0) and the MNIST reader: torch.utils.data's core.

A DataLoader over a TensorDataset (with the default collation and sampling) builds each batch with
one index_select per tensor instead of indexing and stacking samples one by one; shuffle draws the
order with kael.randperm, so kael.manual_seed (or generator=) reproduces it. The samplers draw
from kael's generators (kael.randperm, kael.randint, kael.multinomial): the same seed gives the
same order in kael on every run, not the order torch draws.
"""
import bisect
import collections.abc
import gzip
import math
import os
import queue
import sys
import threading
import zlib

import kael
from kael import _C

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset", "ChainDataset", "Subset",
           "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler", "DataLoader", "random_split", "get_worker_info", "WorkerInfo", "default_collate",
           "default_convert",
           "read_idx", "load_mnist"]


class Dataset:
    """A map-style dataset: subclasses define __getitem__(index) and __len__()."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset of samples drawn by iterating over it (__iter__), in the order it yields them: a
    DataLoader batches them as they come (no sampler, no shuffle)."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Samples are the index-th rows of the tensors (all of the same first size)."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset: at least one tensor is needed")
        for t in tensors:
            if not isinstance(t, kael.Tensor):
                raise TypeError(f"TensorDataset: expected tensors, got {type(t).__name__}")
            if t.dim() == 0:
                raise ValueError("TensorDataset: 0-d tensors have no samples")
        sizes = [t.size(0) for t in tensors]
        if any(size != sizes[0] for size in sizes):
            raise AssertionError(f"Size mismatch between tensors: first sizes {sizes}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].size(0)


class Subset(Dataset):
    """The samples of dataset at the given indices."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = list(indices)

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


class StackDataset(Dataset):
    """Samples are tuples (positional datasets) or dicts (keyword datasets) of the datasets'
    index-th samples; every dataset has the same length."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like input/output, "
                             "but both types are given.")
        datasets = args or tuple(kwargs.values())
        if not datasets:
            raise ValueError("At least one dataset should be passed")
        self._length = len(datasets[0])
        if any(self._length != len(d) for d in datasets):
            raise ValueError("Size mismatch between datasets")
        self.datasets = args if args else kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {key: d[index] for key, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __len__(self):
        return self._length


class ConcatDataset(Dataset):
    """The samples of several map-style datasets, one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        if index < 0:
            if -index > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            index += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[which - 1] if which > 0 else 0
        return self.datasets[which][index - start]


class ChainDataset(IterableDataset):
    """The samples of several iterable datasets, one after another."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(d)
        return total


# ---------------------------------------------------------------- samplers

# Note [Samplers draw lazily]
# A sampler's indices are drawn as they are taken, a chunk at a time, never num_samples at once:
# RandomSampler(data, replacement=True, num_samples=10**10) yields its first index at once, in
# little memory, as torch's does. RandomSampler follows torch's sampler.py draw for draw:
# without a generator it seeds a generator of its own from one draw of the default generator
# (kael.empty((), dtype=kael.int64).random_()) when iteration starts, so what else draws from the
# default generator between batches does not change its order; with replacement it draws 32
# indices per kael.randint; without, one kael.randperm(n) per whole permutation and one for the
# rest (empty when there is none, which takes the generator as far: one call, Note "Random
# numbers" in docs/decisions/random.md). WeightedRandomSampler with replacement draws kael.multinomial
# in chunks of max(65536, len(weights)) (one call, as torch's, up to that many samples). A
# permutation of the data (RandomSampler without replacement, SubsetRandomSampler, a shuffled
# DataLoader) holds len(data) indices, as torch's does. The values are kael's Philox stream,
# not torch's.
_REPLACEMENT_CHUNK = 32
_WEIGHTED_CHUNK = 1 << 16


def _seeded_generator():
    """torch's RandomSampler without a generator: a generator seeded from the default one."""
    seed = int(kael.empty((), dtype=kael.int64).random_().item())
    generator = kael.Generator()
    generator.manual_seed(seed)
    return generator


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} should be a positive integer value, but got {name}={value}")


class Sampler:
    """Yields indices into a dataset (or lists of them: a batch sampler)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """The indices of data_source in a random order (kael.randperm), num_samples of them (whole
    permutations, then part of one); with replacement, num_samples uniform draws (kael.randint).
    Drawn as torch draws them (Note [Samplers draw lazily])."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement}")
        _positive_int("num_samples", self.num_samples)

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def _chunks(self):
        """The indices as tensors, one draw each, drawn as they are needed."""
        n = len(self.data_source)
        generator = self.generator if self.generator is not None else _seeded_generator()
        num_samples = self.num_samples
        if self.replacement:
            for _ in range(num_samples // _REPLACEMENT_CHUNK):
                yield kael.randint(high=n, size=(_REPLACEMENT_CHUNK,), dtype=kael.int64, generator=generator)
            yield kael.randint(high=n, size=(num_samples % _REPLACEMENT_CHUNK,), dtype=kael.int64,
                               generator=generator)
            return
        for _ in range(num_samples // n):
            yield kael.randperm(n, generator=generator)
        rest = num_samples % n
        # torch draws a last permutation for the rest, an empty rest too: an empty draw takes as
        # much of the generator (one call) without the work
        yield kael.randperm(n if rest else 0, generator=generator)[:rest]

    def __iter__(self):
        for chunk in self._chunks():
            yield from chunk.tolist()

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in kael.randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices in [0, len(weights)), each drawn with probability proportional to its
    weight (kael.multinomial), with or without replacement."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        _positive_int("num_samples", num_samples)
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        weights = kael.as_tensor(weights, dtype=kael.float64)
        if weights.dim() != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {tuple(weights.shape)}")
        self.weights = weights
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        if not self.replacement:  # at most len(weights) draws (multinomial refuses more)
            yield from kael.multinomial(self.weights, self.num_samples, False, generator=self.generator).tolist()
            return
        # chunks of at least len(weights) draws: each multinomial call sums the weights again
        chunk = max(_WEIGHTED_CHUNK, self.weights.numel())
        for start in range(0, self.num_samples, chunk):
            yield from kael.multinomial(self.weights, min(chunk, self.num_samples - start), True,
                                        generator=self.generator).tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of batch_size indices from sampler (the last one shorter unless drop_last)."""

    def __init__(self, sampler, batch_size, drop_last):
        _positive_int("batch_size", batch_size)
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size


class WorkerInfo:
    """What a DataLoader worker thread knows of itself (get_worker_info() in it): id (0 to
    num_workers - 1), num_workers, seed (the epoch's base seed + id) and dataset (the loader's
    own: threads share it), as torch's WorkerInfo with worker_method 'thread'."""

    __slots__ = ("id", "num_workers", "seed", "dataset", "worker_method")

    def __init__(self, id, num_workers, seed, dataset):
        for name, value in (("id", id), ("num_workers", num_workers), ("seed", seed), ("dataset", dataset),
                            ("worker_method", "thread")):
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise RuntimeError(f"Cannot assign attributes to {type(self).__name__} objects")

    def __repr__(self):
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, dataset={self.dataset!r})"


_worker_local = threading.local()


def get_worker_info():
    """The WorkerInfo of the DataLoader worker thread calling it; None outside workers (as torch
    returns in its main process)."""
    return getattr(_worker_local, "info", None)


def random_split(dataset, lengths, generator=None):
    """Splits dataset into non-overlapping Subsets of the given lengths (or fractions summing to
    1, rounded down with the remainder spread one by one from the first), in a random order drawn
    with kael.randperm."""
    n = len(dataset)
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            counts.append(int(math.floor(n * frac)))
        remainder = n - sum(counts)
        for i in range(remainder):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = kael.randperm(n, generator=generator).tolist()
    subsets = []
    offset = 0
    for length in lengths:
        subsets.append(Subset(dataset, order[offset:offset + length]))
        offset += length
    return subsets


def _is_numpy(x, kinds):
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, tuple(getattr(np, k) for k in kinds))


def default_collate(batch):
    """Merges a list of samples into a batch as torch.utils.data.default_collate does, sample
    type by sample type (the first sample's): tensors are stacked; NumPy arrays (not of str or
    object) become tensors, then are stacked; NumPy scalars and Python ints and bools become one
    tensor with the dtype kael.tensor infers from all of them (Python floats: float64); str and
    bytes stay a list; a dict gives a dict of batches, a named tuple a named tuple, any other
    sequence (tuples too) a list of batches, one per position (all samples of equal length)."""
    first = batch[0]
    if isinstance(first, kael.Tensor):
        return kael.stack(list(batch))
    if _is_numpy(first, ("ndarray",)):
        if first.dtype.kind in "SaUO":
            raise TypeError(f"default_collate: batch must contain tensors, numbers, dicts or lists; found "
                            f"a NumPy array of {first.dtype}")
        return default_collate([kael.as_tensor(b) for b in batch])
    if _is_numpy(first, ("bool_", "number", "object_")):
        return kael.as_tensor(list(batch))
    if isinstance(first, float):
        return kael.tensor(list(batch), dtype=kael.float64)
    if isinstance(first, int):
        return kael.tensor(list(batch))
    if isinstance(first, (str, bytes)):
        return list(batch)
    if isinstance(first, collections.abc.Mapping):
        collated = {key: default_collate([sample[key] for sample in batch]) for key in first}
        try:
            return type(first)(collated)
        except TypeError:
            return collated
    if isinstance(first, tuple) and hasattr(first, "_fields"):  # a named tuple
        return type(first)(*(default_collate(list(column)) for column in zip(*batch)))
    if isinstance(first, collections.abc.Sequence):
        size = len(first)
        if any(len(sample) != size for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [default_collate(list(column)) for column in zip(*batch)]
        if isinstance(first, tuple):
            return columns
        try:
            return type(first)(columns)
        except TypeError:
            return columns
    raise TypeError(f"default_collate: batch must contain tensors, numbers, dicts or lists; found {type(first)}")


def default_convert(data):
    """One sample as torch.utils.data.default_convert leaves it (what a DataLoader with
    batch_size=None yields): NumPy arrays (not of str or object) and scalars become tensors,
    mappings and sequences are converted item by item (a tuple becomes a list), the rest is
    returned as it is."""
    if isinstance(data, kael.Tensor):
        return data
    if _is_numpy(data, ("ndarray",)):
        return data if data.dtype.kind in "SaUO" else kael.as_tensor(data)
    if _is_numpy(data, ("bool_", "number", "object_")):
        return kael.as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        converted = {key: default_convert(data[key]) for key in data}
        try:
            return type(data)(converted)
        except TypeError:
            return converted
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


class DataLoader:
    """Iterates over dataset in batches of batch_size samples (the last one shorter unless
    drop_last): indices from sampler (default: in order, or shuffled with kael.randperm from
    generator=, else the default generator) grouped by batch_sampler (default: BatchSampler), or
    the samples of an IterableDataset as it yields them. collate_fn turns a list of samples into a
    batch (default_collate; default_convert for each sample when batch_size is None). Batches are
    built in the calling thread, or with num_workers > 0 by that many worker threads (not
    processes: Note [DataLoader workers are threads]), at most prefetch_factor batches ahead per
    worker."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if isinstance(dataset, IterableDataset):
            for name, value in (("shuffle", shuffle), ("sampler", sampler), ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(f"DataLoader with IterableDataset: expected unspecified {name} option, but got "
                                     f"{name}={value}")
        elif shuffle not in (None, False) and sampler is not None:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                                 "drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None:
            if drop_last:
                raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with "
                                 "drop_last")
        else:
            _positive_int("batch_size", batch_size)
        # the default sampling: the fast path of TensorDataset batches applies to it alone
        self._default_sampling = sampler is None and batch_sampler is None
        if not isinstance(dataset, IterableDataset):
            if sampler is None:
                sampler = (RandomSampler(dataset, generator=generator) if shuffle
                           else SequentialSampler(dataset))
            if batch_size is not None and batch_sampler is None:
                batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.collate_fn = collate_fn
        self.generator = generator
        self.num_workers = num_workers
        self.multiprocessing_context = multiprocessing_context
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.in_order = in_order

    def __len__(self):
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size
        return len(self.batch_sampler) if self.batch_sampler is not None else len(self.sampler)

    def __iter__(self):
        if self.batch_size is not None and self.batch_size > sys.maxsize:
            # torch's batch sampler slices with itertools.islice, which raises this ValueError
            # at the first batch; kael raises the same class there, with what is wrong
            raise ValueError(f"DataLoader: batch_size={self.batch_size} is larger than sys.maxsize ({sys.maxsize})")
        if self.num_workers > 0:
            yield from _threaded_batches(self)
            return
        if isinstance(self.dataset, IterableDataset):
            yield from self._iterable_batches()
            return
        if self.batch_sampler is not None and self._default_sampling and isinstance(self.dataset, TensorDataset) \
                and self.collate_fn is None:
            yield from self._tensor_batches()
            return
        for task in (self.sampler if self.batch_sampler is None else self.batch_sampler):
            yield _fetch(self, task)

    def _tensor_batches(self):
        """The default sampling of a TensorDataset, one index_select per tensor and batch (the
        order drawn as RandomSampler draws it when shuffled)."""
        n = len(self.dataset)
        order = kael.cat(list(self.sampler._chunks())) if isinstance(self.sampler, RandomSampler) \
            else kael.arange(n)
        for start in range(0, n, self.batch_size):
            stop = min(start + self.batch_size, n)
            if stop - start < self.batch_size and self.drop_last:
                return
            index = order[start:stop]
            yield [t.index_select(0, index) for t in self.dataset.tensors]

    def _iterable_batches(self):
        source = iter(self.dataset)
        while (batch := _next_iterable_batch(self, source)) is not _EXHAUSTED:
            yield batch


# Note [DataLoader workers are threads]
# torch's workers are processes, each with a copy of the dataset; kael's are threads of the calling
# process sharing the loader's dataset: kael's kernels release the GIL, as do file reads, so
# threads overlap the work that dominates loading tensors, without pickling the dataset or every
# batch. Otherwise they follow torch's protocol: batch k (its indices drawn by the calling thread
# from batch_sampler, or sampler without batching) goes to worker k % num_workers, at most
# prefetch_factor * num_workers batches are sent and not yet yielded (those done and waiting for
# their turn included: a slow batch holds the indices drawn back, as torch's), and batches come
# back in order (in_order=False: as they are done). An IterableDataset is iterated by every worker (each its own iter(dataset): a
# dataset shards itself through get_worker_info(), as in torch, or each worker yields all of it);
# an exhausted worker drops out of the rotation. worker_init_fn(id) runs first in each worker,
# with get_worker_info() set. Its seed is base + id, base derived from the initial seed of the
# loader's generator (or the default one) and the loader's epoch count: reproducible, and drawn
# from no generator, so the batches come in the same order with any num_workers (torch draws its
# base seed from the generator that also shuffles). An exception in a worker is raised in the calling thread, the same object; the workers of
# an epoch stop when it ends, is abandoned (the iterator closed or collected) or fails.
# persistent_workers keeps no threads between epochs (they are cheap to start); the option is
# checked and kept. timeout > 0 bounds the wait for each batch (RuntimeError, torch's message).
_STOP = object()
_EXHAUSTED = object()


def _worker_loop(loader, worker_id, seed, tasks, results, stop):
    _worker_local.info = WorkerInfo(worker_id, loader.num_workers, seed, loader.dataset)
    iterable = isinstance(loader.dataset, IterableDataset)
    try:
        if loader.worker_init_fn is not None:
            loader.worker_init_fn(worker_id)
        source = iter(loader.dataset) if iterable else None
    except BaseException as e:  # noqa: B036 (reported to the calling thread, which raises it)
        results.put((None, worker_id, e))
        return
    while not stop.is_set():
        task = tasks.get()
        if task is _STOP:
            return
        number, indices = task
        try:
            batch = _next_iterable_batch(loader, source) if iterable else _fetch(loader, indices)
        except BaseException as e:  # noqa: B036
            results.put((number, worker_id, e))
            return
        results.put((number, worker_id, batch))


def _fetch(loader, task):
    """The batch of a batch sampler's list of indices, or the sample of a sampler's index (no
    batching)."""
    if loader.batch_sampler is None:
        return (loader.collate_fn if loader.collate_fn is not None else default_convert)(loader.dataset[task])
    return (loader.collate_fn if loader.collate_fn is not None else default_collate)(
        [loader.dataset[i] for i in task])


def _next_iterable_batch(loader, source):
    """The next batch of an IterableDataset's iterator, or _EXHAUSTED."""
    if loader.batch_size is None:
        for sample in source:
            return (loader.collate_fn if loader.collate_fn is not None else default_convert)(sample)
        return _EXHAUSTED
    samples = []
    for sample in source:
        samples.append(sample)
        if len(samples) == loader.batch_size:
            break
    if not samples or (len(samples) < loader.batch_size and loader.drop_last):
        return _EXHAUSTED
    return (loader.collate_fn if loader.collate_fn is not None else default_collate)(samples)


def _threaded_batches(loader):
    workers = loader.num_workers
    loader._epochs = getattr(loader, "_epochs", 0) + 1
    initial = (loader.generator.initial_seed() if loader.generator is not None else kael.initial_seed())
    seed = (initial + 0x9E3779B97F4A7C15 * loader._epochs) % (1 << 62)
    iterable = isinstance(loader.dataset, IterableDataset)
    if iterable:
        tickets = iter(int, 1)  # a task per batch until every worker is exhausted
    elif loader.batch_sampler is not None:
        tickets = iter(loader.batch_sampler)
    else:
        tickets = iter(loader.sampler)
    tasks = [queue.SimpleQueue() for _ in range(workers)]
    results = queue.SimpleQueue()
    stop = threading.Event()
    threads = [threading.Thread(target=_worker_loop, args=(loader, w, seed + w, tasks[w], results, stop),
                                name=f"kael DataLoader worker {w}", daemon=True) for w in range(workers)]
    for t in threads:
        t.start()
    active = list(range(workers))  # the workers still in the rotation
    rotation = 0
    in_flight = {}  # task number -> worker
    done = {}  # finished batches waiting for their turn (in_order)
    sent = 0
    next_out = 0
    depth = max(1, loader.prefetch_factor) * workers
    tickets_left = True
    try:
        while True:
            # batches sent and not yet yielded, finished ones waiting for their turn included,
            # are at most depth (torch: a new task for each batch it yields)
            while tickets_left and len(in_flight) + len(done) < depth and active:
                try:
                    indices = next(tickets)
                except StopIteration:
                    tickets_left = False
                    break
                worker = active[rotation % len(active)]
                rotation += 1
                tasks[worker].put((sent, indices))
                in_flight[sent] = worker
                sent += 1
            if not in_flight and not done:
                return
            if loader.in_order and next_out in done:
                batch = done.pop(next_out)
                next_out += 1
                if batch is not _EXHAUSTED:
                    yield batch
                continue
            if not in_flight:  # every task sent is in flight, waiting in done, or yielded
                raise RuntimeError(f"DataLoader: batch {next_out} was lost by the workers")
            try:
                number, worker, batch = results.get(timeout=loader.timeout if loader.timeout > 0 else None)
            except queue.Empty:
                raise RuntimeError(f"DataLoader timed out after {loader.timeout} seconds") from None
            if isinstance(batch, BaseException):
                raise batch
            del in_flight[number]
            if batch is _EXHAUSTED:
                if worker in active:
                    active.remove(worker)
                if not active:
                    tickets_left = False
            if loader.in_order:
                done[number] = batch
            elif batch is not _EXHAUSTED:
                yield batch
    finally:
        stop.set()
        for q in tasks:
            q.put(_STOP)
        for t in threads:
            t.join()


# ---------------------------------------------------------------- IDX files (MNIST)


def read_idx(path):
    """The tensor stored in an IDX file (raw, or gzip-compressed: recognised by its magic bytes),
    parsed by the C++ reader; ValueError for truncated or corrupt files."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise ValueError(f"read_idx: {path}: corrupt gzip data: {e}") from None
    return _C._parse_idx(data, path)


_MNIST_FILES = {True: ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
                False: ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def _find(root, name):
    for folder in (root, os.path.join(root, "MNIST", "raw"), os.path.join(root, "raw")):
        for candidate in (name, name + ".gz"):
            path = os.path.join(folder, candidate)
            if os.path.isfile(path):
                return path
    raise FileNotFoundError(f"load_mnist: no {name} or {name}.gz in {root} (nor in its MNIST/raw folder)")


def load_mnist(path, train=True):
    """(images, labels) of the MNIST training set (train=True) or test set, read from the IDX
    files in the folder path (the original names, raw or .gz; torchvision's MNIST/raw layout is
    found too): images uint8 of shape (N, rows, cols), labels int64 of shape (N,)."""
    path = os.fspath(path)
    images_file, labels_file = (_find(path, name) for name in _MNIST_FILES[bool(train)])
    images = read_idx(images_file)
    labels = read_idx(labels_file)
    if images.dim() != 3 or images.dtype != kael.uint8:
        raise ValueError(f"load_mnist: {images_file}: expected uint8 images of 3 dims, got {images.dtype} of shape "
                         f"{list(images.shape)}")
    if labels.dim() != 1 or labels.dtype != kael.uint8:
        raise ValueError(f"load_mnist: {labels_file}: expected uint8 labels of 1 dim, got {labels.dtype} of shape "
                         f"{list(labels.shape)}")
    if images.size(0) != labels.size(0):
        raise ValueError(f"load_mnist: {images.size(0)} images but {labels.size(0)} labels")
    return images, labels.to(dtype=kael.int64)
