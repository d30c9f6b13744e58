"""Hostile safetensors files for the fuzz test (test_safetensors_fuzz.py) and the long run
(tools/bench/safetensors_fuzz.py): valid files written by the reference, then mutated by bit
flips, truncation, header edits (JSON-aware and raw splices), length-field edits and random
headers. `run_case` feeds one file to kael and says what happened; only ValueError and OSError
may come out, and a file kael accepts must hold the same values as the reference reads."""
import json
import os
import random
import struct

import numpy as np
import safetensors
import safetensors.numpy
import safetensors.torch
import torch

import kael

NP_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]
ST_DTYPES = ["BOOL", "U8", "I8", "I16", "I32", "I64", "F16", "BF16", "F32", "F64", "U16", "U32", "U64",
             "F8_E4M3", "F8_E5M2", "F4", "C64", "Q8", "", "f32", "F32 "]
TOKENS = ['"', "{", "}", "[", "]", ",", ":", "-", "0", "01", "1e999", "1.5", "-1", "18446744073709551616",
          "9223372036854775808", "null", "true", "\\", "\\u", "\\ud800", "\\udc00", "\\u0000", "\x00", "\xff",
          " ", "\n", '"dtype"', '"shape"', '"data_offsets"', '"__metadata__"', "{}", "[]", '""', "\U0001F600"]
MUTATIONS = ["bitflip", "truncate", "extend", "header_edit", "splice", "length", "random_header", "none"]


def valid_file(rng):
    """Bytes of a valid file from the reference writer, with its header and its arrays."""
    arrays = {}
    for i in range(rng.randint(0, 5)):
        dtype = rng.choice(NP_DTYPES)
        shape = tuple(rng.randint(0, 4) for _ in range(rng.randint(0, 3)))
        n = int(np.prod(shape)) if shape else 1
        raw = np.frombuffer(rng.randbytes(n * np.dtype(dtype).itemsize), dtype=np.uint8)
        arr = (raw % 2).astype(bool) if dtype == "bool" else raw.view(dtype)
        arrays[rng.choice(["w", "bias", "layer.%d" % i, "é", "a b", "x" * rng.randint(1, 40)]) + str(i)] = \
            arr.reshape(shape)
    metadata = None
    if rng.random() < 0.5:
        # at most one key: the reference writes a Rust HashMap, whose order varies from run to run
        metadata = {"k%d" % i: rng.choice(["v", "", "ü\n", "x" * 30]) for i in range(rng.randint(0, 1))}
    return safetensors.numpy.save(arrays, metadata=metadata)


def split(data):
    n = struct.unpack("<Q", data[:8])[0]
    return n, data[8:8 + n], data[8 + n:]


def assemble(header, body, length=None):
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header) if length is None else length) + header + body


def random_number(rng):
    return rng.choice([0, 1, 2, 7, 8, 2**31, 2**32, 2**53, 2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 2**70,
                       -1, -8, 1.5, 1e300, "1", None, True, [], {}])


def edit_header(rng, header):
    """A JSON-aware edit: dtypes, shapes, offsets, keys, names, metadata."""
    try:
        obj = json.loads(header)
    except ValueError:
        return header
    names = [k for k in obj if k != "__metadata__"]
    kind = rng.randrange(10)
    if names and kind < 7:
        name = rng.choice(names)
        e = obj[name]
        if not isinstance(e, dict):
            return header
        if kind == 0:
            e["dtype"] = rng.choice(ST_DTYPES + [random_number(rng)])
        elif kind == 1 and isinstance(e.get("shape"), list):
            shape = e["shape"]
            op = rng.randrange(4)
            if op == 0:
                shape.append(rng.choice([0, 1, 2, 2**32]))
            elif op == 1 and shape:
                shape[rng.randrange(len(shape))] = random_number(rng)
            elif op == 2 and shape:
                shape.pop()
            else:
                e["shape"] = random_number(rng) if rng.random() < 0.5 else [1] * rng.randint(60, 70)
        elif kind == 2:
            offs = e.get("data_offsets")
            if isinstance(offs, list) and len(offs) == 2:
                i = rng.randrange(2)
                offs[i] = offs[i] + rng.choice([-9, -8, -1, 1, 8, 9]) if rng.random() < 0.6 else random_number(rng)
                if rng.random() < 0.2:
                    offs.reverse()
            else:
                e["data_offsets"] = random_number(rng)
        elif kind == 3:
            e.pop(rng.choice(["dtype", "shape", "data_offsets"]), None)
        elif kind == 4:
            e[rng.choice(["extra", "dtype2", ""])] = random_number(rng)
        elif kind == 5:
            obj[name] = random_number(rng)
        else:
            obj[name + rng.choice(["", "x"])] = dict(e)
            if rng.random() < 0.5:  # a duplicate key, which json.dumps cannot write
                text = json.dumps(obj, separators=(",", ":"))
                dup = json.dumps(name) + ":" + json.dumps(e, separators=(",", ":"))
                return text[:-1] + ("," if len(obj) else "") + dup + "}"
    elif kind < 9:
        md = obj.setdefault("__metadata__", {})
        if isinstance(md, dict):
            md[rng.choice(["k", "__metadata__", ""])] = rng.choice(["v", random_number(rng)])
        else:
            obj["__metadata__"] = random_number(rng)
    else:
        obj = rng.choice([[], "x", 1, None, {"__metadata__": []}, obj])
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=rng.random() < 0.5)


def random_header(rng):
    if rng.random() < 0.3:
        return rng.randbytes(rng.randint(0, 200))
    parts = ["{"]
    for _ in range(rng.randint(0, 12)):
        parts.append(rng.choice(TOKENS))
    if rng.random() < 0.7:
        parts.append("}")
    return "".join(parts).encode("utf-8", "surrogatepass")


def mutate(rng, data, kind):
    n, header, body = split(data)
    if kind == "bitflip":
        b = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            limit = 8 + n if rng.random() < 0.8 else len(b)
            i = rng.randrange(limit)
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b)
    if kind == "truncate":
        return data[:rng.randrange(len(data) + 1)]
    if kind == "extend":
        return data + rng.randbytes(rng.randint(1, 16))
    if kind == "header_edit":
        return assemble(edit_header(rng, header.decode("utf-8", "replace")).encode("utf-8", "surrogatepass"), body)
    if kind == "splice":
        text = bytearray(header.rstrip(b" "))
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(text) + 1)
            j = min(len(text), i + rng.randint(0, 4))
            text[i:j] = rng.choice(TOKENS).encode("utf-8", "surrogatepass")
        return assemble(bytes(text), body)
    if kind == "length":
        length = rng.choice([0, 1, n - 1, n + 1, n - 8, n + 8, 2**63, 2**64 - 1, 100_000_000, 100_000_001,
                             rng.randrange(2**64)])
        return assemble(header, body, length=max(0, length) % 2**64)
    if kind == "random_header":
        return assemble(random_header(rng), body if rng.random() < 0.5 else b"")
    return data


def make_case(seed):
    """(mutation kind, file bytes, mmap) of case number `seed`."""
    rng = random.Random(seed)
    data = valid_file(rng)
    kind = MUTATIONS[seed % len(MUTATIONS)]
    return kind, mutate(rng, data, kind), rng.random() < 0.5


def reference_tensors(data):
    """What safetensors.torch reads from `data` (None when it refuses the file)."""
    try:
        return safetensors.torch.load(data)
    except Exception:  # noqa: BLE001 - whatever the reference refuses with
        return None


def run_case(path, data, mmap, split_refusals=False):
    """Feeds `data` (written to `path`) to kael. Returns "ValueError", "OSError" or "loaded";
    raises AssertionError when anything else comes out or the values disagree. With
    `split_refusals`, a ValueError says whether the reference refuses the file too."""
    tmp = str(path) + ".new"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)  # never truncate a file an earlier case may still map
    outcome = None
    try:
        kael.read_safetensors_metadata(path)
        loaded = kael.load_safetensors(path, mmap=mmap)
    except ValueError as e:
        assert "safetensors" in str(e).split(":")[0], str(e)
        outcome = "ValueError"
    except OSError:
        outcome = "OSError"
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"{type(e).__name__}: {e}") from e
    if outcome is not None:
        if split_refusals and outcome == "ValueError":
            return outcome + (" (the reference too)" if reference_tensors(data) is None else
                              " (the reference loads it)")
        return outcome
    ref = reference_tensors(data)
    # kael is the stricter reader (docs/decisions/safetensors.md): what it loads, the reference loads too
    assert ref is not None, "kael loads a file that safetensors refuses"
    for name, t in loaded.items():
        if t.numel() == 0:  # (a shape such as (2**40, 0) is valid; its tolist() would not fit in memory)
            assert name not in ref or tuple(ref[name].shape) == t.shape, name
            continue
        values = t.tolist()  # reads every byte of the tensor (ASan checks the mapping)
        if name in ref:
            expected = ref[name]
            if expected.dtype == torch.bool:
                expected = expected.view(torch.uint8) != 0  # kael reads bytes > 1 as True
            got = torch.tensor(values, dtype=expected.dtype).reshape(expected.shape)
            torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True, msg=name)
    assert sorted(ref) == sorted(loaded), (sorted(ref), sorted(loaded))
    return "loaded"
