"""kael.save_safetensors / load_safetensors / read_safetensors_metadata against the
`safetensors` package (the oracle, pinned in requirements-dev.txt): files go both ways and are
byte-identical, every kael dtype and layout, mmap's sharing and copy-on-write, and a ValueError
naming the file, the tensor and the reason for each way a header can be wrong."""
import gc
import json
import os
import struct
import threading

import numpy as np
import pytest
import safetensors
import safetensors.numpy
import safetensors.torch
import torch

import kael
from helpers import DTYPE_NAMES, LAYOUTS, check, make_pair, to_kael, to_torch

ST_NAME = {"bool": "BOOL", "uint8": "U8", "int8": "I8", "int16": "I16", "int32": "I32", "int64": "I64",
           "float16": "F16", "bfloat16": "BF16", "float32": "F32", "float64": "F64"}
assert set(ST_NAME) == set(DTYPE_NAMES)


def same_bits(a, b):
    """Two torch tensors are equal bit for bit (NaN payloads included) in shape and dtype."""
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    if a.dtype.is_floating_point:
        view = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        return torch.equal(a.contiguous().view(view), b.contiguous().view(view))
    return torch.equal(a, b)


def raw_file(path, header, data=b"", length=None, pad=True):
    """A file with `header` (a dict, serialised compactly, or bytes/str as is) and `data`."""
    if isinstance(header, dict):
        header = json.dumps(header, separators=(",", ":"))
    if isinstance(header, str):
        header = header.encode()
    if pad:
        header += b" " * (-len(header) % 8)
    n = len(header) if length is None else length
    path.write_bytes(struct.pack("<Q", n) + header + data)
    return path


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


# ---------------------------------------------------------------- kael -> the reference

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_kael_files_load_in_safetensors_torch_and_numpy(tmp_path, dtype, layout):
    a = make_pair((3, 5), dtype, layout)
    b = make_pair((4,), dtype, "step" if layout != "contig" else "contig")
    scalar = make_pair((), dtype)
    empty = make_pair((0, 3), dtype)
    path = tmp_path / "k.safetensors"
    kael.save_safetensors({"a": a.k, "b": b.k, "scalar": scalar.k, "empty": empty.k}, path)
    loaded = safetensors.torch.load_file(str(path))
    assert sorted(loaded) == ["a", "b", "empty", "scalar"]
    for name, pair in (("a", a), ("b", b), ("scalar", scalar), ("empty", empty)):
        assert same_bits(loaded[name], pair.t), name
    if dtype != "bfloat16":  # NumPy has no bfloat16
        arrays = safetensors.numpy.load_file(str(path))
        for name, pair in (("a", a), ("b", b), ("scalar", scalar), ("empty", empty)):
            assert arrays[name].dtype == pair.t.numpy().dtype
            np.testing.assert_array_equal(arrays[name], pair.t.numpy())


def test_files_are_byte_identical_to_the_reference_writer(tmp_path):
    tensors = {}
    for i, dtype in enumerate(DTYPE_NAMES):
        for j, shape in enumerate([(2, 3), (), (0,), (5,)]):
            tensors[f"{dtype}.{j}"] = make_pair(shape, dtype)
    # names that need JSON escapes, non-ASCII names, names that sort before and after others
    tensors["a\"b\\c\n\t\x01/é😀"] = make_pair((3,), "float32")
    tensors[""] = make_pair((1,), "int64")
    tensors["Z"] = make_pair((1,), "bool")
    for metadata in (None, {}, {"format": "pt"}, {"k\"\n": "v\x1fé"}):
        kpath, tpath = tmp_path / "kael.safetensors", tmp_path / "torch.safetensors"
        kael.save_safetensors({n: p.k for n, p in tensors.items()}, kpath, metadata=metadata)
        safetensors.torch.save_file({n: p.t for n, p in tensors.items()}, str(tpath), metadata=metadata)
        assert kpath.read_bytes() == tpath.read_bytes(), metadata


def test_metadata_with_several_keys_reads_back_in_the_reference(tmp_path):
    # The reference writes a Rust HashMap (its key order varies); kael keeps the dict's order.
    metadata = {f"key{i}": f"value {i} ü" for i in range(20)}
    path = tmp_path / "m.safetensors"
    kael.save_safetensors({"w": kael.ones(2)}, path, metadata)
    with safetensors.safe_open(str(path), framework="pt") as f:
        assert f.metadata() == metadata
    assert kael.read_safetensors_metadata(path) == metadata
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    assert list(json.loads(raw[8:8 + n])["__metadata__"]) == list(metadata)


def test_non_contiguous_tensors_are_written_in_c_order(tmp_path):
    base = torch.arange(4 * 6 * 5, dtype=torch.float64).reshape(4, 6, 5)
    kbase = to_kael(base)
    views = {
        "permuted": (base.permute(2, 0, 1), kbase.permute(2, 0, 1)),
        "sliced": (base[1:, ::2, 1::3], kbase[1:, ::2, 1::3]),
        "expanded": (base[:1, :1, :].expand(3, 4, 5), kbase[:1, :1, :].expand(3, 4, 5)),
        "column": (base[:, 2, 3], kbase[:, 2, 3]),
    }
    for tv, kv in views.values():
        assert not kv.is_contiguous()
    path = tmp_path / "v.safetensors"
    kael.save_safetensors({n: kv for n, (tv, kv) in views.items()}, path)
    loaded = safetensors.torch.load_file(str(path))
    for n, (tv, kv) in views.items():
        assert torch.equal(loaded[n], tv), n
    ref = tmp_path / "ref.safetensors"
    safetensors.torch.save_file({n: tv.contiguous() for n, (tv, kv) in views.items()}, str(ref))
    assert path.read_bytes() == ref.read_bytes()


def test_large_non_contiguous_tensor_crosses_the_write_buffer(tmp_path):
    base = torch.randn(700, 1100)
    k = to_kael(base)
    path = tmp_path / "t.safetensors"
    kael.save_safetensors({"t": k.T, "s": k[:, ::3]}, path)
    loaded = safetensors.torch.load_file(str(path))
    assert torch.equal(loaded["t"], base.T) and torch.equal(loaded["s"], base[:, ::3])


# ---------------------------------------------------------------- the reference -> kael

@pytest.mark.parametrize("mmap", [False, True], ids=["read", "mmap"])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_reference_files_load_in_kael(tmp_path, dtype, mmap):
    tensors = {"a": make_pair((3, 5), dtype).t, "s": make_pair((), dtype).t, "e": make_pair((2, 0), dtype).t,
               "b": make_pair((7,), dtype).t}
    path = tmp_path / "t.safetensors"
    safetensors.torch.save_file(tensors, str(path), metadata={"framework": "pt"})
    loaded = kael.load_safetensors(path, mmap=mmap)
    assert list(loaded) == sorted(tensors)
    for name, t in tensors.items():
        check(loaded[name], t, atol=0, rtol=0)
        assert loaded[name].is_contiguous()
    assert kael.read_safetensors_metadata(str(path)) == {"framework": "pt"}


@pytest.mark.parametrize("mmap", [False, True], ids=["read", "mmap"])
def test_numpy_files_load_in_kael_bit_for_bit(tmp_path, mmap):
    rng = np.random.default_rng(0)
    arrays = {
        "f32": rng.standard_normal((4, 4)).astype(np.float32),
        "f64": np.array([np.nan, -0.0, np.inf, 1e-310]),
        "f16": rng.standard_normal(9).astype(np.float16),
        "i8": np.array([-128, 127, 0], dtype=np.int8),
        "i16": np.array([-32768, 32767], dtype=np.int16),
        "i32": np.array([-2**31, 2**31 - 1], dtype=np.int32),
        "i64": np.array([-2**63, 2**63 - 1], dtype=np.int64),
        "u8": np.array([0, 255], dtype=np.uint8),
        "b": np.array([True, False, True]),
    }
    arrays["f64"] = np.concatenate([arrays["f64"], np.frombuffer(struct.pack("<Q", 0x7FF8_0000_DEAD_BEEF), np.float64)])
    path = tmp_path / "n.safetensors"
    safetensors.numpy.save_file(arrays, str(path))
    loaded = kael.load_safetensors(str(path), mmap=mmap)
    for name, arr in arrays.items():
        k = loaded[name]
        assert k.shape == arr.shape
        # back through the reference: kael's bytes are the file's bytes
        out = tmp_path / f"{name}.safetensors"
        kael.save_safetensors({"x": k}, out)
        back = safetensors.numpy.load_file(str(out))["x"]
        assert back.dtype == arr.dtype and back.tobytes() == arr.tobytes(), name


def test_bfloat16_files_from_torch(tmp_path):
    t = torch.randn(33).to(torch.bfloat16)
    path = tmp_path / "bf.safetensors"
    safetensors.torch.save_file({"x": t}, str(path))
    for mmap in (False, True):
        k = kael.load_safetensors(path, mmap=mmap)["x"]
        assert k.dtype is kael.bfloat16
        check(k, t, atol=0, rtol=0)


@pytest.mark.parametrize("np_dtype,st", [(np.uint16, "U16"), (np.uint32, "U32"), (np.uint64, "U64")])
@pytest.mark.parametrize("mmap", [False, True], ids=["read", "mmap"])
def test_dtypes_kael_lacks_raise_value_error_naming_them(tmp_path, np_dtype, st, mmap):
    path = tmp_path / "u.safetensors"
    safetensors.numpy.save_file({"fine": np.ones(2, np.float32), "odd one": np.ones(3, np_dtype)}, str(path))
    with pytest.raises(ValueError, match=rf"load_safetensors: '.*u\.safetensors': tensor 'odd one': dtype {st} is not "
                                         r"supported by kael"):
        kael.load_safetensors(path, mmap=mmap)
    assert kael.read_safetensors_metadata(path) == {}  # the header itself is valid


def test_float8_from_torch_is_refused_by_name(tmp_path):
    path = tmp_path / "f8.safetensors"
    safetensors.torch.save_file({"q": torch.zeros(4).to(torch.float8_e4m3fn)}, str(path))
    with pytest.raises(ValueError, match="tensor 'q': dtype F8_E4M3 is not supported by kael"):
        kael.load_safetensors(path)


# ---------------------------------------------------------------- metadata

def test_metadata_round_trip_and_absent_metadata(tmp_path):
    path = tmp_path / "m.safetensors"
    kael.save_safetensors({}, path, metadata={"a": "1", "é": "\n"})
    assert kael.read_safetensors_metadata(path) == {"a": "1", "é": "\n"}
    assert kael.load_safetensors(path) == {}
    kael.save_safetensors({"w": kael.zeros(1)}, path)
    assert kael.read_safetensors_metadata(path) == {}
    with safetensors.safe_open(str(path), framework="pt") as f:
        assert f.metadata() is None


def test_paths_may_be_str_bytes_or_pathlike(tmp_path):
    path = tmp_path / "p.safetensors"
    kael.save_safetensors({"w": kael.ones(2)}, os.fsencode(path))
    assert kael.load_safetensors(path)["w"].tolist() == [1.0, 1.0]
    assert kael.load_safetensors(str(path))["w"].tolist() == [1.0, 1.0]


# ---------------------------------------------------------------- mmap

def test_mmap_tensors_share_the_mapping(tmp_path):
    path = tmp_path / "big.safetensors"
    t = torch.randn(1 << 20)  # 4 MiB
    safetensors.torch.save_file({"x": t, "y": t[:10].clone()}, str(path))
    kael.empty_cache()
    before = kael.allocator_stats()["in_use_bytes"]
    mapped = kael.load_safetensors(path, mmap=True)
    assert kael.allocator_stats()["in_use_bytes"] - before < 4096  # nothing copied
    read = kael.load_safetensors(path, mmap=False)
    assert kael.allocator_stats()["in_use_bytes"] - before >= 4 << 20
    check(mapped["x"], t, atol=0, rtol=0)
    check(read["x"], t, atol=0, rtol=0)


def test_mmap_writes_copy_on_write_and_never_reach_the_file(tmp_path):
    path = tmp_path / "w.safetensors"
    t = torch.arange(10, dtype=torch.float32)
    safetensors.torch.save_file({"x": t, "z": torch.zeros(3, dtype=torch.int64)}, str(path))
    before = path.read_bytes()
    loaded = kael.load_safetensors(path, mmap=True)
    x = loaded["x"]
    view = x[2:5]
    x.add_(1)
    view[0] = 100.0
    loaded["z"].fill_(7)
    assert x.tolist() == [1.0, 2.0, 100.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    assert loaded["z"].tolist() == [7, 7, 7]
    assert path.read_bytes() == before
    again = kael.load_safetensors(path, mmap=True)
    check(again["x"], t, atol=0, rtol=0)
    assert again["z"].tolist() == [0, 0, 0]
    assert safetensors.torch.load_file(str(path))["x"].tolist() == t.tolist()


def test_mmap_mapping_lives_as_long_as_any_tensor(tmp_path):
    path = tmp_path / "l.safetensors"
    t = torch.randn(300, 70)
    safetensors.torch.save_file({"a": t, "b": t[0].clone()}, str(path))
    loaded = kael.load_safetensors(path, mmap=True)
    view = loaded["a"][5:9, ::7]
    del loaded
    gc.collect()
    os.remove(path)  # the mapping outlives the file's name too
    check(view, t[5:9, ::7], atol=0, rtol=0)
    # a tensor held from C++ alone, dropped on a thread Python never saw
    loaded = kael.load_safetensors(raw_copy(tmp_path, t), mmap=True)
    capsule = kael._C._native_ref(loaded["a"])
    del loaded
    gc.collect()
    kael._C._drop_native_ref(capsule, True)


def raw_copy(tmp_path, t):
    path = tmp_path / "copy.safetensors"
    safetensors.torch.save_file({"a": t}, str(path))
    return path


def test_saving_over_a_mapped_file_leaves_the_mapping_intact(tmp_path):
    path = tmp_path / "s.safetensors"
    t = torch.randn(5000)
    safetensors.torch.save_file({"x": t}, str(path))
    mapped = kael.load_safetensors(path, mmap=True)["x"]
    kael.save_safetensors({"x": kael.zeros(10)}, path)  # renamed over it: the old inode stays
    check(mapped, t, atol=0, rtol=0)
    assert kael.load_safetensors(path)["x"].tolist() == [0.0] * 10
    assert sorted(os.listdir(tmp_path)) == ["s.safetensors"]  # no temporary file left


def test_mmap_of_unaligned_data_copies_that_tensor(tmp_path):
    # Another writer may leave the data section or a tensor unaligned: values still load.
    data = b"\x07" + struct.pack("<3f", 1.5, -2.0, 3.25) + struct.pack("<2d", 0.5, -8.0)
    header = {"u": entry("U8", [1], 0, 1), "f": entry("F32", [3], 1, 13), "d": entry("F64", [2], 13, 29)}
    for pad in (True, False):
        path = raw_file(tmp_path / f"u{pad}.safetensors", header, data, pad=pad)
        for mmap in (False, True):
            loaded = kael.load_safetensors(path, mmap=mmap)
            assert loaded["u"].tolist() == [7]
            assert loaded["f"].tolist() == [1.5, -2.0, 3.25]
            assert loaded["d"].tolist() == [0.5, -8.0]
            assert (loaded["f"] * 2).tolist() == [3.0, -4.0, 6.5]


@pytest.mark.parametrize("mmap", [False, True], ids=["read", "mmap"])
def test_bool_bytes_other_than_0_and_1_load_as_true(tmp_path, mmap):
    path = raw_file(tmp_path / "b.safetensors", {"b": entry("BOOL", [5], 0, 5)}, bytes([0, 1, 2, 255, 0]))
    b = kael.load_safetensors(path, mmap=mmap)["b"]
    expected = np.frombuffer(bytes([0, 1, 2, 255, 0]), np.uint8) != 0
    assert b.tolist() == expected.tolist()
    assert b.sum().item() == 3 and (b == True).tolist() == expected.tolist()  # noqa: E712
    assert (b.to(kael.uint8)).tolist() == [0, 1, 1, 1, 0]


def test_load_runs_without_the_gil(tmp_path):
    path = tmp_path / "g.safetensors"
    safetensors.torch.save_file({f"t{i}": torch.randn(1 << 16) for i in range(64)}, str(path))
    results = []

    def work():
        for _ in range(5):
            results.append(len(kael.load_safetensors(path)))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == [64] * 20


# ---------------------------------------------------------------- argument errors

def test_argument_errors(tmp_path):
    path = tmp_path / "e.safetensors"
    with pytest.raises(TypeError, match="save_safetensors: tensors must be a dict of str to Tensor, got list"):
        kael.save_safetensors([kael.ones(1)], path)
    with pytest.raises(TypeError, match="tensor names must be str, got int"):
        kael.save_safetensors({1: kael.ones(1)}, path)
    with pytest.raises(TypeError, match="the value of 'w' must be a Tensor, got Tensor"):
        kael.save_safetensors({"w": torch.ones(1)}, path)
    with pytest.raises(TypeError, match="metadata must map str to str, got str: int"):
        kael.save_safetensors({"w": kael.ones(1)}, path, {"a": 1})
    with pytest.raises(TypeError, match="metadata must be a dict of str to str or None, got list"):
        kael.save_safetensors({"w": kael.ones(1)}, path, [])
    with pytest.raises(TypeError, match="path must be a str, bytes or os.PathLike, got int"):
        kael.load_safetensors(3)
    with pytest.raises(ValueError, match="the name '__metadata__' is reserved"):
        kael.save_safetensors({"__metadata__": kael.ones(1)}, path)
    with pytest.raises(UnicodeEncodeError):
        kael.save_safetensors({"\ud800": kael.ones(1)}, path)
    assert not path.exists()


def test_file_system_errors_are_os_errors_naming_the_file(tmp_path):
    missing = tmp_path / "missing.safetensors"
    with pytest.raises(FileNotFoundError) as e:
        kael.load_safetensors(missing)
    assert e.value.filename == missing and "load_safetensors: cannot open the file" in str(e.value)
    with pytest.raises(FileNotFoundError):
        kael.read_safetensors_metadata(str(missing))
    with pytest.raises(IsADirectoryError):
        kael.load_safetensors(tmp_path)
    with pytest.raises(FileNotFoundError):
        kael.save_safetensors({"w": kael.ones(1)}, tmp_path / "no" / "such" / "dir.safetensors")
    (tmp_path / "d").mkdir()
    with pytest.raises(OSError):
        kael.save_safetensors({"w": kael.ones(1)}, tmp_path / "d")
    assert os.listdir(tmp_path / "d") == [] and sorted(os.listdir(tmp_path)) == ["d"]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        kael.load_safetensors(fifo)


def test_a_failed_save_keeps_the_old_file(tmp_path):
    path = tmp_path / "keep.safetensors"
    kael.save_safetensors({"w": kael.ones(3)}, path)
    before = path.read_bytes()
    with pytest.raises(ValueError):
        kael.save_safetensors({"w": kael.zeros(3), "__metadata__": kael.ones(1)}, path)
    assert path.read_bytes() == before
    with pytest.raises(IsADirectoryError):  # the rename fails: a directory holds the name
        kael.save_safetensors({"w": kael.zeros(3)}, tmp_path)
    assert path.read_bytes() == before


# ---------------------------------------------------------------- hardened parsing

GOOD = {"a": entry("F32", [2, 2], 0, 16), "b": entry("I64", [1], 16, 24)}
GOOD_DATA = bytes(24)

BAD_HEADERS = [
    # (header, data, tensor named or None, reason fragment)
    ("{", GOOD_DATA, None, "invalid JSON in the header at byte 8: expected a string key, found the end"),
    ('{"a":', GOOD_DATA, "a", "the entry must be an object with dtype, shape and data_offsets, found the end"),
    ("[]", b"", None, "the header must be a JSON object"),
    ('{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"a":{"dtype":"I64","shape":[1],"data_offsets":[16,24]}}',
     GOOD_DATA, "a", "duplicate tensor name 'a'"),
    ({"a": entry("Q7", [2, 2], 0, 16), "b": GOOD["b"]}, GOOD_DATA, "a", "unknown dtype 'Q7'"),
    ({"a": entry("F32", [2, 2], 0, 16), "b": entry("I64", [1], 16, 32)}, GOOD_DATA, "b",
     "data_offsets [16, 32] reach beyond the data section of 24 bytes"),
    ({"a": entry("F32", [2, 2], 0, 16), "b": entry("I64", [1], 8, 16)}, bytes(16), "b",
     "data_offsets [8, 16] overlap those of tensor 'a' [0, 16]"),
    ({"a": entry("F32", [2, 2], 0, 16), "b": entry("I64", [1], 17, 25)}, bytes(25), "b",
     "leave bytes [16, 17) of the data section to no tensor"),
    (GOOD, GOOD_DATA + b"x", None, "the tensors cover 24 bytes, but the data section holds 25 bytes"),
    ({"a": entry("F32", [2, 3], 0, 16), "b": GOOD["b"]}, GOOD_DATA, "a",
     "shape [2, 3] of F32 needs 24 bytes, but data_offsets [0, 16] hold 16"),
    ({"a": entry("F32", [2, -2], 0, 16), "b": GOOD["b"]}, GOOD_DATA, "a", "must not be negative, found -2"),
    ({"a": entry("F32", [2, 2.0], 0, 16), "b": GOOD["b"]}, GOOD_DATA, "a", "must be an integer, found 2.0"),
    ({"a": entry("F32", [2, 2], 0, 16), "b": entry("I64", [1], 16, 2**64)}, GOOD_DATA, "b", "integer overflow"),
    ({"a": entry("F32", [2**40, 2**40], 0, 16), "b": GOOD["b"]}, GOOD_DATA, "a", "integer overflow"),
    ({"a": entry("F32", [2**61], 0, 16), "b": GOOD["b"]}, GOOD_DATA, "a", "integer overflow"),
    ({"a": entry("F32", [2, 2], 0, 16), "b": {"dtype": "I64", "shape": [1]}}, GOOD_DATA, "b",
     "missing key 'data_offsets'"),
    ({"__metadata__": {"k": 1}, **GOOD}, GOOD_DATA, None, "'__metadata__' value of key 'k' must be a string"),
]


@pytest.mark.parametrize("case", range(len(BAD_HEADERS)))
@pytest.mark.parametrize("fn", ["load", "mmap", "metadata"])
def test_each_bad_header_is_a_value_error_naming_file_tensor_and_reason(tmp_path, case, fn):
    header, data, tensor, reason = BAD_HEADERS[case]
    path = raw_file(tmp_path / "bad.safetensors", header, data)
    call = {"load": lambda: kael.load_safetensors(path), "mmap": lambda: kael.load_safetensors(path, mmap=True),
            "metadata": lambda: kael.read_safetensors_metadata(path)}[fn]
    op = "read_safetensors_metadata" if fn == "metadata" else "load_safetensors"
    with pytest.raises(ValueError) as e:
        call()
    msg = str(e.value)
    assert f"{op}: '{path}': " in msg, msg
    assert reason in msg, msg
    if tensor is not None:
        assert f"tensor '{tensor}': " in msg, msg


def test_header_length_checks(tmp_path):
    path = tmp_path / "h.safetensors"
    path.write_bytes(b"\x01\x02")
    with pytest.raises(ValueError, match="the file has 2 bytes, too few for the 8-byte header length"):
        kael.load_safetensors(path)
    raw_file(path, GOOD, GOOD_DATA, length=10**9)
    with pytest.raises(ValueError, match="header length 1000000000 exceeds the limit of 100000000 bytes"):
        kael.load_safetensors(path)
    raw_file(path, GOOD, GOOD_DATA, length=2**64 - 1)
    with pytest.raises(ValueError, match="header length 18446744073709551615 exceeds the limit"):
        kael.load_safetensors(path, mmap=True)
    raw_file(path, GOOD, GOOD_DATA, length=5000)
    with pytest.raises(ValueError, match=r"header length 5000 reaches beyond the end of the file \(\d+ bytes\)"):
        kael.read_safetensors_metadata(path)
    # the reference refuses the same files
    for length in (10**9, 5000):
        raw_file(path, GOOD, GOOD_DATA, length=length)
        with pytest.raises(Exception):
            safetensors.torch.load_file(str(path))


def test_a_valid_hand_written_header_loads(tmp_path):
    # whitespace and key order of other writers are fine; the reference agrees on the values
    header = ' { "b" : {"data_offsets":[16,24],"shape":[1],"dtype":"I64"},\n "a":{"shape":[2,2],"dtype":"F32",' \
             '"data_offsets":[0,16]} } '
    data = struct.pack("<4f", 1, 2, 3, 4) + struct.pack("<q", -5)
    path = raw_file(tmp_path / "ok.safetensors", header, data, pad=False)
    loaded = kael.load_safetensors(path)
    assert loaded["a"].tolist() == [[1.0, 2.0], [3.0, 4.0]] and loaded["b"].tolist() == [-5]
    ref = safetensors.torch.load_file(str(path))
    check(loaded["a"], ref["a"], atol=0, rtol=0)
    check(loaded["b"], ref["b"], atol=0, rtol=0)


def test_oracle_version_is_the_pinned_one():
    assert safetensors.__version__ == "0.8.0"


def test_round_trip_through_kael_keeps_values(tmp_path):
    for dtype in DTYPE_NAMES:
        p = make_pair((6, 4), dtype, "T")
        path = tmp_path / f"{dtype}.safetensors"
        kael.save_safetensors({"x": p.k}, path)
        for mmap in (False, True):
            k = kael.load_safetensors(path, mmap=mmap)["x"]
            assert k.is_contiguous() and same_bits(to_torch(k), p.t)
