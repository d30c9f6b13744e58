"""kael.data: datasets, DataLoader (order, shuffle reproducibility, drop_last, collate), random_split,
and the IDX reader behind load_mnist with files the tests write (raw, gzip, truncated, corrupt)."""
import gzip
import struct

import pytest
import torch
import torch.utils.data as tdata

import kael
from kael import data
from helpers import check, to_kael


def test_tensor_dataset_and_loader_in_order_match_torch():
    x, y = torch.randn(10, 3), torch.arange(10)
    kloader = data.DataLoader(data.TensorDataset(to_kael(x), to_kael(y)), batch_size=4)
    tloader = tdata.DataLoader(tdata.TensorDataset(x, y), batch_size=4)
    assert len(kloader) == len(tloader) == 3
    batches = list(kloader)
    for (kx, ky), (tx, ty) in zip(batches, tloader):
        check(kx, tx)
        check(ky, ty)
    assert len(batches) == 3
    ds = data.TensorDataset(to_kael(x), to_kael(y))
    assert len(ds) == 10
    check(ds[3][0], x[3])


def test_drop_last():
    x = torch.arange(10)
    for drop_last, expected in ((True, [[0, 1, 2], [3, 4, 5], [6, 7, 8]]),
                                (False, [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]])):
        loader = data.DataLoader(data.TensorDataset(to_kael(x)), batch_size=3, drop_last=drop_last)
        assert [b[0].tolist() for b in loader] == expected
        assert len(loader) == len(tdata.DataLoader(tdata.TensorDataset(x), batch_size=3, drop_last=drop_last))


def test_shuffle_is_a_permutation_reproducible_under_manual_seed():
    ds = data.TensorDataset(kael.arange(50), kael.arange(50) * 2)

    def epoch():
        return [(a.tolist(), b.tolist()) for a, b in data.DataLoader(ds, batch_size=8, shuffle=True)]

    kael.manual_seed(7)
    first = epoch()
    second = epoch()
    kael.manual_seed(7)
    again = epoch()
    assert first == again
    assert first != second
    order = [i for a, _ in first for i in a]
    assert sorted(order) == list(range(50)) and order != list(range(50))
    assert all(b == [2 * i for i in a] for a, b in first)  # rows stay aligned across the tensors
    generator = kael.Generator()
    generator.manual_seed(3)
    g1 = [a.tolist() for a, _ in data.DataLoader(ds, batch_size=50, shuffle=True, generator=generator)]
    generator.manual_seed(3)
    g2 = [a.tolist() for a, _ in data.DataLoader(ds, batch_size=50, shuffle=True, generator=generator)]
    assert g1 == g2


def test_tensor_dataset_batches_use_one_index_select_per_tensor(monkeypatch):
    calls = []

    class Counting(kael.Tensor):
        def index_select(self, dim, index):
            calls.append(index.tolist())
            return super().index_select(dim, index)

    def no_item_access(self, index):
        raise AssertionError("the fast path must not index samples one by one")

    monkeypatch.setattr(data.TensorDataset, "__getitem__", no_item_access)
    ds = data.TensorDataset(Counting(kael.randn(12, 2)), Counting(kael.arange(12)))
    batches = list(data.DataLoader(ds, batch_size=5))
    assert [b[0].shape for b in batches] == [(5, 2), (5, 2), (2, 2)]
    assert calls == [list(range(5))] * 2 + [list(range(5, 10))] * 2 + [[10, 11]] * 2


class Squares(data.Dataset):
    def __len__(self):
        return 7

    def __getitem__(self, i):
        return {"x": kael.tensor([float(i), 1.0]), "y": i * i, "w": 0.5 * i, "name": f"s{i}"}


class TorchSquares(tdata.Dataset):
    def __len__(self):
        return 7

    def __getitem__(self, i):
        return {"x": torch.tensor([float(i), 1.0]), "y": i * i, "w": 0.5 * i, "name": f"s{i}"}


def test_default_collate_matches_torch():
    for kb, tb in zip(data.DataLoader(Squares(), batch_size=3), tdata.DataLoader(TorchSquares(), batch_size=3)):
        check(kb["x"], tb["x"])
        check(kb["y"], tb["y"])
        check(kb["w"], tb["w"])
        assert kb["name"] == tb["name"]


def test_collate_fn_and_batch_size_none():
    ds = data.TensorDataset(kael.arange(5))
    seen = []
    loader = data.DataLoader(ds, batch_size=2, collate_fn=lambda samples: seen.append(samples) or len(samples))
    assert list(loader) == [2, 2, 1]
    assert [s[0][0].item() for s in seen] == [0, 2, 4]
    assert [s[0].item() for s in data.DataLoader(ds, batch_size=None)] == [0, 1, 2, 3, 4]


def test_loader_argument_checks():
    ds = data.TensorDataset(kael.arange(5))
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="batch_size should be a positive integer"):
            data.DataLoader(ds, batch_size=bad)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="num_workers option should be non-negative"):
            data.DataLoader(ds, num_workers=bad)
    with pytest.raises(AssertionError, match="Size mismatch"):
        data.TensorDataset(kael.zeros(3), kael.zeros(4))
    with pytest.raises(AssertionError, match="Size mismatch"):
        tdata.TensorDataset(torch.zeros(3), torch.zeros(4))


def test_random_split():
    ds = data.TensorDataset(kael.arange(10))
    kael.manual_seed(0)
    parts = data.random_split(ds, [7, 3])
    assert [len(p) for p in parts] == [7, 3]
    values = sorted(p[i][0].item() for p in parts for i in range(len(p)))
    assert values == list(range(10))
    kael.manual_seed(0)
    assert [p.indices for p in data.random_split(ds, [7, 3])] == [p.indices for p in parts]
    fractions = data.random_split(ds, [0.33, 0.33, 0.34])
    assert [len(p) for p in fractions] == [len(p) for p in tdata.random_split(range(10), [0.33, 0.33, 0.34])]
    with pytest.raises(ValueError, match="Sum of input lengths"):
        data.random_split(ds, [5, 4])
    loader = data.DataLoader(parts[1], batch_size=3)
    assert sorted(loader.__iter__().__next__()[0].tolist()) == sorted(parts[1][i][0].item() for i in range(3))


# ------------------------------------------------------------------ IDX / MNIST


def idx_bytes(values, shape, code=0x08, fmt="B"):
    header = bytes([0, 0, code, len(shape)]) + b"".join(struct.pack(">I", s) for s in shape)
    return header + struct.pack(">" + fmt * len(values), *values)


def write(path, content, compress=False):
    path.write_bytes(gzip.compress(content) if compress else content)
    return path


@pytest.mark.parametrize("compress", [False, True])
def test_read_idx_uint8(tmp_path, compress):
    values = [(i * 37) % 256 for i in range(2 * 3 * 4)]
    path = write(tmp_path / "a.idx", idx_bytes(values, (2, 3, 4)), compress)
    t = data.read_idx(path)
    check(t, torch.tensor(values, dtype=torch.uint8).reshape(2, 3, 4))


@pytest.mark.parametrize("code,fmt,dtype", [(0x09, "b", torch.int8), (0x0B, "h", torch.int16),
                                            (0x0C, "i", torch.int32), (0x0D, "f", torch.float32),
                                            (0x0E, "d", torch.float64)])
def test_read_idx_other_types_are_big_endian(tmp_path, code, fmt, dtype):
    values = [-3, 7, 1000 if fmt not in "b" else 100, -1, 0, 5]
    if fmt in "fd":
        values = [v + 0.25 for v in values]
    path = write(tmp_path / "b.idx", idx_bytes(values, (3, 2), code, fmt))
    check(data.read_idx(path), torch.tensor(values, dtype=dtype).reshape(3, 2))


def test_read_idx_errors(tmp_path):
    good = idx_bytes(list(range(12)), (3, 4))
    cases = [
        (b"\x00\x00", "shorter than the 4-byte magic"),
        (b"\x12\x34\x08\x01" + good[4:], "not an IDX file.*0x12 0x34"),
        (b"\x00\x00\x07\x02" + good[4:], "unknown IDX type code 0x07"),
        (good[:9], "truncated IDX header: 2 dims need 12 bytes, the file has 9"),
        (good[:-1], r"truncated IDX data: the header's shape \[3, 4\] needs 12 bytes, the file has 11"),
        (good + b"\x00", "1 unexpected bytes after the IDX data"),
        (b"\x00\x00\x08\x02" + struct.pack(">II", 0xFFFFFFFF, 0xFFFFFFFF), "needs 18446744065119617025 bytes"),
        (b"\x00\x00\x0e\x03" + struct.pack(">III", 0xFFFFFFFF, 0xFFFFFFFF, 2), "overflow the element count"),
    ]
    for i, (content, message) in enumerate(cases):
        path = write(tmp_path / f"bad{i}", content)
        with pytest.raises(ValueError, match=message) as info:
            data.read_idx(path)
        assert str(path) in str(info.value)
    corrupt = gzip.compress(good)
    path = write(tmp_path / "corrupt.gz", corrupt[:-12])
    with pytest.raises(ValueError, match="corrupt gzip data"):
        data.read_idx(path)
    with pytest.raises(FileNotFoundError):
        data.read_idx(tmp_path / "missing")
    with pytest.raises(TypeError):
        kael._C._parse_idx("text", "name")


def test_read_idx_empty_dims(tmp_path):
    t = data.read_idx(write(tmp_path / "e", idx_bytes([], (0, 5))))
    assert t.shape == (0, 5) and t.dtype is kael.uint8


def test_load_mnist(tmp_path):
    images = [(i * 7) % 256 for i in range(3 * 4 * 5)]
    labels = [3, 1, 4]
    write(tmp_path / "train-images-idx3-ubyte.gz", idx_bytes(images, (3, 4, 5)), compress=True)
    write(tmp_path / "train-labels-idx1-ubyte", idx_bytes(labels, (3,)))
    x, y = data.load_mnist(tmp_path)
    check(x, torch.tensor(images, dtype=torch.uint8).reshape(3, 4, 5))
    check(y, torch.tensor(labels))
    with pytest.raises(FileNotFoundError, match="t10k-images-idx3-ubyte"):
        data.load_mnist(tmp_path, train=False)
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    write(raw / "t10k-images-idx3-ubyte", idx_bytes(images, (3, 4, 5)))
    write(raw / "t10k-labels-idx1-ubyte", idx_bytes(labels[:2], (2,)))
    with pytest.raises(ValueError, match="3 images but 2 labels"):
        data.load_mnist(tmp_path, train=False)
    write(raw / "t10k-labels-idx1-ubyte", idx_bytes(labels, (3,)))
    x, y = data.load_mnist(tmp_path, train=False)
    loader = data.DataLoader(data.TensorDataset(x, y), batch_size=2)
    assert [b[1].tolist() for b in loader] == [[3, 1], [4]]


# ---------------------------------------------------------------- samplers and composed datasets

class PlainSquares:
    """A map-style dataset written once for both libraries: (i, i * i) as Python ints."""

    def __init__(self, n, base):
        self.n, self.base = n, base

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i, i * i

    def __len__(self):
        return self.n


def squares(lib_data, n):
    return type("Sq", (PlainSquares, lib_data.Dataset), {})(n, lib_data)


def counting(lib_data, n, length=True):
    """An IterableDataset of the dicts {'i': k} for k < n (with __len__ when length)."""
    members = {"__iter__": lambda self: iter({"i": k} for k in range(n))}
    if length:
        members["__len__"] = lambda self: n
    return type("Counting", (lib_data.IterableDataset,), members)()


def as_lists(batches):
    def plain(b):
        if isinstance(b, (kael.Tensor, torch.Tensor)):
            return ("tensor", str(b.dtype).split(".")[-1], b.tolist())
        if isinstance(b, dict):
            return {k: plain(v) for k, v in b.items()}
        if isinstance(b, (list, tuple)):
            return type(b)(plain(v) for v in b)
        return b
    return [plain(b) for b in batches]


def both(make):
    """make(lib_data) for kael.data and torch.utils.data: the batches of each as plain lists."""
    return as_lists(make(data)), as_lists(make(tdata))


@pytest.mark.parametrize("make", [
    lambda D: D.DataLoader(squares(D, 10), batch_size=3, sampler=D.SequentialSampler(range(10))),
    lambda D: D.DataLoader(squares(D, 10), batch_size=4, sampler=[9, 0, 5, 5, 2], drop_last=True),
    lambda D: D.DataLoader(squares(D, 10), batch_sampler=[[1, 2], [7], [0, 3, 9]]),
    lambda D: D.DataLoader(squares(D, 10), batch_sampler=D.BatchSampler(D.SequentialSampler(range(7)), 3, False)),
    lambda D: D.DataLoader(squares(D, 6), batch_size=None, sampler=[4, 1]),
    lambda D: list(D.BatchSampler(range(10), 4, True)) + list(D.BatchSampler(range(10), 4, False)),
    lambda D: list(D.SequentialSampler(squares(D, 5))),
    lambda D: D.DataLoader(counting(D, 7), batch_size=3),
    lambda D: D.DataLoader(counting(D, 7), batch_size=3, drop_last=True),
    lambda D: D.DataLoader(counting(D, 4), batch_size=None),
    lambda D: D.DataLoader(counting(D, 5) + counting(D, 2), batch_size=2),
    lambda D: D.DataLoader(D.ChainDataset([counting(D, 3), counting(D, 3)]), batch_size=4, collate_fn=lambda b: b),
    lambda D: D.DataLoader(squares(D, 3) + squares(D, 4), batch_size=3),
    lambda D: [D.ConcatDataset([squares(D, 3), squares(D, 4)])[i] for i in (0, 2, 3, 6, -1, -7)],
    lambda D: D.DataLoader(D.StackDataset(squares(D, 5), squares(D, 5)), batch_size=2),
    lambda D: D.DataLoader(D.StackDataset(a=squares(D, 4), b=squares(D, 4)), batch_size=3),
], ids=["sequential-sampler", "list-sampler", "list-batch-sampler", "batch-sampler", "sampler-no-batching",
        "batch-sampler-alone", "sequential-alone", "iterable", "iterable-drop-last", "iterable-no-batching",
        "iterable-add", "chain", "concat-add", "concat-index", "stack-tuple", "stack-dict"])
def test_sampled_and_composed_batches_match_torch(make):
    k, t = both(make)
    assert k == t


def test_loader_lengths_match_torch():
    for make in (lambda D: D.DataLoader(squares(D, 10), batch_size=3, sampler=[1, 2, 3, 4]),
                 lambda D: D.DataLoader(squares(D, 10), batch_sampler=[[1], [2, 3]]),
                 lambda D: D.DataLoader(counting(D, 7), batch_size=3),
                 lambda D: D.DataLoader(counting(D, 7), batch_size=3, drop_last=True),
                 lambda D: D.DataLoader(counting(D, 7), batch_size=None),
                 lambda D: D.BatchSampler(range(10), 4, True), lambda D: D.BatchSampler(range(10), 4, False),
                 lambda D: D.ConcatDataset([squares(D, 3), squares(D, 4)]),
                 lambda D: D.ChainDataset([counting(D, 3), counting(D, 5)])):
        assert len(make(data)) == len(make(tdata))
    for D in (data, tdata):
        with pytest.raises(TypeError):
            len(D.DataLoader(counting(D, 3, length=False), batch_size=2))


def test_random_samplers_draw_permutations_reproducibly():
    ds = squares(data, 10)
    for make in (lambda g: data.RandomSampler(ds, generator=g), lambda g: data.SubsetRandomSampler(range(10), g)):
        first = list(make(kael.Generator().manual_seed(5)))
        assert sorted(first) == list(range(10)) and first != list(range(10))
        assert list(make(kael.Generator().manual_seed(5))) == first
        assert list(make(kael.Generator().manual_seed(6))) != first
    # more samples than the dataset has: whole permutations, then part of one
    drawn = list(data.RandomSampler(ds, num_samples=25, generator=kael.Generator().manual_seed(1)))
    assert len(drawn) == 25 and sorted(drawn[:10]) == sorted(drawn[10:20]) == list(range(10))
    assert len(set(drawn[20:])) == 5
    with_replacement = list(data.RandomSampler(ds, replacement=True, num_samples=200,
                                               generator=kael.Generator().manual_seed(2)))
    assert len(with_replacement) == 200 and set(with_replacement) == set(range(10))
    assert len(data.RandomSampler(ds, num_samples=7)) == 7 and len(data.RandomSampler(ds)) == 10
    sub = list(data.SubsetRandomSampler([7, 3, 11], generator=kael.Generator().manual_seed(0)))
    assert sorted(sub) == [3, 7, 11]
    # the shuffled loader and a RandomSampler with the same generator state draw the same order
    loader = data.DataLoader(data.TensorDataset(kael.arange(10)), batch_size=10, shuffle=True,
                             generator=kael.Generator().manual_seed(9))
    assert next(iter(loader))[0].tolist() == list(data.RandomSampler(ds, generator=kael.Generator().manual_seed(9)))


def test_weighted_random_sampler_draws_by_weight():
    weights = [0.0, 1.0, 3.0, 0.0, 6.0]
    draws = list(data.WeightedRandomSampler(weights, 4000, generator=kael.Generator().manual_seed(3)))
    counts = [draws.count(i) for i in range(5)]
    assert counts[0] == counts[3] == 0
    assert abs(counts[4] / 4000 - 0.6) < 0.04 and abs(counts[1] / 4000 - 0.1) < 0.03
    unique = list(data.WeightedRandomSampler(weights, 3, replacement=False))
    assert sorted(unique) == [1, 2, 4]
    assert len(data.WeightedRandomSampler(weights, 9)) == 9


@pytest.mark.parametrize("make", [
    lambda D: D.RandomSampler(range(3), replacement=1),
    lambda D: D.RandomSampler(range(3), num_samples=0),
    lambda D: D.RandomSampler(range(3), num_samples=2.5),
    lambda D: D.WeightedRandomSampler([1.0, 2.0], 0),
    lambda D: D.WeightedRandomSampler([1.0, 2.0], 3, replacement="yes"),
    lambda D: D.WeightedRandomSampler([[1.0, 2.0]], 3),
    lambda D: D.BatchSampler(range(3), 0, False),
    lambda D: D.BatchSampler(range(3), 2, 1),
    lambda D: D.DataLoader(squares(D, 3), sampler=[0], shuffle=True),
    lambda D: D.DataLoader(squares(D, 3), batch_sampler=[[0]], batch_size=2),
    lambda D: D.DataLoader(squares(D, 3), batch_sampler=[[0]], drop_last=True),
    lambda D: D.DataLoader(squares(D, 3), batch_sampler=[[0]], sampler=[0]),
    lambda D: D.DataLoader(counting(D, 3), shuffle=True),
    lambda D: D.DataLoader(counting(D, 3), sampler=[0]),
    lambda D: D.DataLoader(squares(D, 3), prefetch_factor=2),
    lambda D: D.DataLoader(squares(D, 3), persistent_workers=True),
    lambda D: D.DataLoader(squares(D, 3), num_workers=-1),
    lambda D: D.DataLoader(squares(D, 3), timeout=-1),
    lambda D: D.StackDataset(squares(D, 3), squares(D, 4)),
    lambda D: D.StackDataset(),
    lambda D: D.ConcatDataset([]),
    lambda D: D.ConcatDataset([counting(D, 2)]),
    lambda D: D.ConcatDataset([squares(D, 3)])[-4],
])
def test_sampler_and_loader_argument_errors_match_torch(make):
    with pytest.raises(Exception) as t:
        make(tdata)
    with pytest.raises(Exception) as k:
        make(data)
    assert type(k.value) is type(t.value)
    assert str(k.value) == str(t.value).replace("torch.", "kael.")


def test_no_worker_info_without_workers():
    assert data.get_worker_info() is None and tdata.get_worker_info() is None


# ---------------------------------------------------------------- worker threads (num_workers > 0)

import threading  # noqa: E402
import time  # noqa: E402


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("make", [
    lambda D, w: D.DataLoader(squares(D, 23), batch_size=4, num_workers=w),
    lambda D, w: D.DataLoader(squares(D, 23), batch_size=5, drop_last=True, num_workers=w,
                              prefetch_factor=1 if w else None),
    lambda D, w: D.DataLoader(squares(D, 9), batch_size=None, num_workers=w),
    lambda D, w: D.DataLoader(squares(D, 9), batch_sampler=[[3, 1], [8], [0, 2, 4, 6]], num_workers=w),
    lambda D, w: D.DataLoader(squares(D, 9), batch_size=2, sampler=[8, 7, 1, 0, 5], num_workers=w),
], ids=["batches", "drop-last", "no-batching", "batch-sampler", "sampler"])
def test_worker_threads_give_torchs_batches_in_order(make, workers):
    # torch's with no workers: its workers (processes) give the same batches in the same order
    assert as_lists(make(data, workers)) == as_lists(make(tdata, 0))


def test_worker_threads_keep_the_shuffled_order_of_no_workers():
    ds = data.TensorDataset(kael.arange(40))
    orders = []
    for workers in (0, 1, 3):
        loader = data.DataLoader(ds, batch_size=6, shuffle=True, num_workers=workers,
                                 generator=kael.Generator().manual_seed(11))
        orders.append([[b[0].tolist() for b in loader] for _ in range(2)])  # two epochs
    assert orders[0] == orders[1] == orders[2]
    assert orders[0][0] != orders[0][1] and sorted(sum(orders[0][0], [])) == list(range(40))
    # the general path (a dataset other than TensorDataset) draws the same orders
    loader = data.DataLoader(squares(data, 40), batch_size=6, shuffle=True, num_workers=2,
                             generator=kael.Generator().manual_seed(11))
    assert [[b[0].tolist() for b in loader] for _ in range(2)] == orders[0]


class Sharded:
    """An IterableDataset of range(n) that each worker reads every num_workers-th element of
    (torch's documented way to split an IterableDataset among workers)."""

    def __init__(self, n, lib_data):
        self.n, self.lib_data = n, lib_data

    def __iter__(self):
        info = self.lib_data.get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.n, step))


def test_iterable_datasets_with_workers_match_torchs_workers():
    for sharded in (False, True):
        got = {}
        for D in (data, tdata):
            ds = (type("S", (Sharded, D.IterableDataset), {})(11, D) if sharded else counting(D, 7))
            got[D] = as_lists(D.DataLoader(ds, batch_size=3, num_workers=2))
        assert got[data] == got[tdata], sharded
    # in_order=False: the same batches, in any order
    loader = data.DataLoader(counting(data, 7), batch_size=2, num_workers=3, in_order=False)
    assert sorted(map(str, as_lists(loader))) == sorted(map(str, as_lists(data.DataLoader(counting(data, 7), batch_size=2,
                                                                                         num_workers=3))))


def test_worker_info_and_init_fn_run_in_each_worker_thread():
    seen = []
    lock = threading.Lock()

    def init(worker_id):
        info = data.get_worker_info()
        with lock:
            seen.append((worker_id, info.id, info.num_workers, info.worker_method, threading.current_thread().name))

    class Probe(data.Dataset):
        def __getitem__(self, i):
            info = data.get_worker_info()
            return i, info.id, info.dataset is self

        def __len__(self):
            return 12

    ds = Probe()
    batches = list(data.DataLoader(ds, batch_size=2, num_workers=3, worker_init_fn=init))
    assert sorted(s[:4] for s in seen) == [(w, w, 3, "thread") for w in range(3)]
    assert all(name != threading.current_thread().name for *_, name in seen)
    # batch k from worker k % 3, which sees the loader's dataset
    assert [b[1].tolist() for b in batches] == [[k % 3] * 2 for k in range(6)]
    assert all(all(b[2]) for b in batches) and data.get_worker_info() is None
    info = None

    def grab(worker_id):
        nonlocal info
        info = data.get_worker_info()
    list(data.DataLoader(ds, num_workers=1, worker_init_fn=grab))
    with pytest.raises(RuntimeError, match="Cannot assign attributes to WorkerInfo objects"):
        info.id = 5


def test_worker_errors_reach_the_caller_and_the_threads_end():
    before = threading.active_count()

    class Fails(data.Dataset):
        def __getitem__(self, i):
            if i == 7:
                raise KeyError(f"no sample {i}")
            return i

        def __len__(self):
            return 20

    for workers in (1, 4):
        with pytest.raises(KeyError, match="no sample 7"):
            list(data.DataLoader(Fails(), batch_size=2, num_workers=workers))
    with pytest.raises(ZeroDivisionError):
        list(data.DataLoader(Fails(), num_workers=2, worker_init_fn=lambda w: 1 / 0))
    # an epoch abandoned part way stops its workers
    it = iter(data.DataLoader(squares(data, 50), batch_size=2, num_workers=3))
    next(it)
    it.close()
    assert threading.active_count() == before


def test_worker_timeout_raises_torchs_error():
    class Slow(data.Dataset):
        def __getitem__(self, i):
            time.sleep(1.0)
            return i

        def __len__(self):
            return 2

    with pytest.raises(RuntimeError, match=r"DataLoader timed out after 0.05 seconds"):
        list(data.DataLoader(Slow(), num_workers=1, timeout=0.05))


def test_worker_option_checks_match_torch():
    for D in (data, tdata):
        with pytest.raises(ValueError, match="prefetch_factor option should be non-negative"):
            D.DataLoader(squares(D, 3), num_workers=2, prefetch_factor=-1)
        loader = D.DataLoader(squares(D, 3), num_workers=2, persistent_workers=True)
        assert loader.prefetch_factor == 2 and loader.persistent_workers and loader.num_workers == 2
