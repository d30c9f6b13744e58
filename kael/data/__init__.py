"""kael.data: datasets, batching and the MNIST reader (torch.utils.data's core, num_workers=0).

A DataLoader over a TensorDataset (with the default collation) builds each batch with one
index_select per tensor instead of indexing and stacking samples one by one; shuffle draws the
order with kael.randperm, so kael.manual_seed (or generator=) reproduces it.
"""
import collections.abc
import gzip
import math
import os
import sys
import zlib

import kael
from kael import _C

__all__ = ["Dataset", "TensorDataset", "Subset", "DataLoader", "random_split", "default_collate", "default_convert",
           "read_idx", "load_mnist"]


class Dataset:
    """A map-style dataset: subclasses define __getitem__(index) and __len__()."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        raise NotImplementedError("kael.data: concatenating datasets is not supported")


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
    drop_last), in order or shuffled with kael.randperm (generator=, else the default generator).
    collate_fn turns a list of samples into a batch (default_collate by default)."""

    def __init__(self, dataset, batch_size=1, shuffle=False, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 generator=None):
        if num_workers != 0:
            raise NotImplementedError("DataLoader: only num_workers=0 is supported (batches are built in the "
                                      "calling thread)")
        if sampler is not None or batch_sampler is not None:
            raise NotImplementedError("DataLoader: sampler and batch_sampler are not supported; use shuffle")
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                       or batch_size <= 0):
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with "
                             "drop_last")
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.collate_fn = collate_fn
        self.generator = generator
        self.num_workers = 0

    def __len__(self):
        n = len(self.dataset)
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size

    def _order(self):
        n = len(self.dataset)
        if self.shuffle:
            return kael.randperm(n, generator=self.generator)
        return kael.arange(n)

    def __iter__(self):
        if self.batch_size is not None and self.batch_size > sys.maxsize:
            # torch's batch sampler slices with itertools.islice, which raises this ValueError
            # at the first batch; kael raises the same class there, with what is wrong
            raise ValueError(f"DataLoader: batch_size={self.batch_size} is larger than sys.maxsize ({sys.maxsize})")
        order = self._order()
        n = order.size(0)
        if self.batch_size is None:
            convert = self.collate_fn if self.collate_fn is not None else default_convert
            for i in order.tolist():
                yield convert(self.dataset[i])
            return
        fast = isinstance(self.dataset, TensorDataset) and self.collate_fn is None
        collate = self.collate_fn if self.collate_fn is not None else default_collate
        for start in range(0, n, self.batch_size):
            stop = min(start + self.batch_size, n)
            if stop - start < self.batch_size and self.drop_last:
                return
            index = order[start:stop]
            if fast:
                yield [t.index_select(0, index) for t in self.dataset.tensors]
            else:
                yield collate([self.dataset[i] for i in index.tolist()])


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
