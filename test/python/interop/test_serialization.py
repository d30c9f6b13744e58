"""kael.save / kael.load (kael/serialization.py): the save-and-load part of PyTorch's tutorial
(beginner_source/basics/saveloadrun_tutorial.py, with the tutorial's own small model in place of
torchvision's vgg16), round trips of every dtype, views, Parameters and containers, and the
weights-only allow-list, which must refuse a hostile file before any of it runs, as torch's does."""
import collections
import io
import os
import pickle
import subprocess
import sys

import pytest
import torch

import kael
from kael import nn
from helpers import DTYPE_NAMES, tdtype, to_kael, to_torch


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(nn.Linear(28 * 28, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x):
        return self.linear_relu_stack(self.flatten(x))


def test_saveloadrun_tutorial(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = NeuralNetwork()
    x = kael.rand(3, 28, 28)
    before = model(x)
    # the tutorial's statements, torch renamed
    kael.save(model.state_dict(), 'model_weights.pth')
    model = NeuralNetwork()  # we do not specify ``weights``, i.e. create untrained model
    assert not kael.equal(model(x), before)
    model.load_state_dict(kael.load('model_weights.pth', weights_only=True))
    model.eval()
    assert kael.equal(model(x), before)
    kael.save(model, 'model.pth')
    model = kael.load('model.pth', weights_only=False)
    assert isinstance(model, NeuralNetwork) and not model.training
    assert kael.equal(model(x), before)
    # the whole model is code, not weights: refused by default, as torch refuses it
    with pytest.raises(pickle.UnpicklingError, match="unsupported global test_serialization.NeuralNetwork"):
        kael.load('model.pth')
    torch.save(torch.nn.Linear(2, 2), 'torch_model.pth')
    with pytest.raises(pickle.UnpicklingError):
        torch.load('torch_model.pth')


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_round_trip_values_and_dtypes(dtype, tmp_path):
    t = (torch.randn(4, 5) * 50).to(tdtype(dtype))
    k = to_kael(t)
    obj = {"t": k, "view": k.t()[1:, ::2], "scalar": k[0, 0], "empty": k[:0], "dtype": k.dtype,
           "shape": k.shape, "device": k.device, "list": [k[1], 3, 2.5, "x", None, True, b"\x00\xff"],
           "nested": collections.OrderedDict(a=(k[2], {1, 2}), b=complex(1, 2))}
    path = tmp_path / "obj.pt"
    kael.save(obj, path)
    got = kael.load(path)
    assert set(got) == set(obj)
    for name in ("t", "view", "scalar", "empty"):
        assert got[name].dtype == obj[name].dtype and got[name].shape == obj[name].shape
        assert torch.equal(to_torch(got[name]), to_torch(obj[name]))
        assert got[name].is_contiguous()
    assert got["dtype"] is k.dtype and got["shape"] == k.shape and isinstance(got["shape"], kael.Size)
    assert got["device"] == k.device
    assert got["list"][1:] == [3, 2.5, "x", None, True, b"\x00\xff"]
    assert torch.equal(to_torch(got["list"][0]), t[1])
    assert isinstance(got["nested"], collections.OrderedDict) and got["nested"]["a"][1] == {1, 2}
    assert got["nested"]["b"] == complex(1, 2)


def test_parameters_keep_their_type_and_requires_grad():
    p = nn.Parameter(kael.randn(3))
    q = nn.Parameter(kael.randn(2), requires_grad=False)
    buf = io.BytesIO()
    kael.save([p, q], buf)
    buf.seek(0)
    a, b = kael.load(buf)
    assert type(a) is nn.Parameter and a.requires_grad and kael.equal(a, p)
    assert type(b) is nn.Parameter and not b.requires_grad


def test_file_objects_and_unseekable_streams():
    t = kael.arange(10.0)
    buf = io.BytesIO()
    kael.save(t, buf)
    data = buf.getvalue()

    class Unseekable(io.RawIOBase):
        def __init__(self, data):
            self.data = data

        def readable(self):
            return True

        def seekable(self):
            return False

        def readinto(self, b):
            n = min(len(b), len(self.data), 7)  # short reads
            b[:n] = self.data[:n]
            self.data = self.data[n:]
            return n

    assert kael.equal(kael.load(Unseekable(data)), t)

    class ReadOnly:  # read() alone, as pickle.load needs
        def __init__(self, data):
            self.stream = io.BytesIO(data)

        def read(self, n=-1):
            return self.stream.read(n)

        def readline(self):
            return self.stream.readline()

    assert kael.equal(kael.load(ReadOnly(data)), t)
    assert kael.equal(kael.load(io.BytesIO(data)), t)
    with pytest.raises(TypeError, match="io.BytesIO"):
        kael.load(data)


class Boom:
    def __reduce__(self):
        return (os.system, ("echo pwned > pwned.txt",))


def test_weights_only_refuses_code_before_running_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    payload = pickle.dumps({"w": kael.ones(2), "x": Boom()}, protocol=2)
    for weights_only in ({}, {"weights_only": None}, {"weights_only": True}):
        with pytest.raises(pickle.UnpicklingError, match="unsupported global posix.system"):
            kael.load(io.BytesIO(payload), **weights_only)
    assert not (tmp_path / "pwned.txt").exists()
    for module, name in (("builtins", "eval"), ("kael", "load"), ("kael._C", "_set_data_"), ("kael._C", "zeros"),
                         ("subprocess", "call"), ("builtins", "getattr")):
        crafted = b"\x80\x02c" + module.encode() + b"\n" + name.encode() + b"\n."
        with pytest.raises(pickle.UnpicklingError, match=f"unsupported global {module}.{name}"):
            kael.load(io.BytesIO(crafted))
    # torch's weights-only load refuses the same file with the same exception class
    with pytest.raises(pickle.UnpicklingError):
        torch.load(io.BytesIO(pickle.dumps(Boom(), protocol=2)), weights_only=True)
    assert not (tmp_path / "pwned.txt").exists()


def test_torch_checkpoints_are_refused_with_a_pointer_to_safetensors(tmp_path):
    path = tmp_path / "torch.pth"
    torch.save({"w": torch.ones(2)}, path)
    with pytest.raises(pickle.UnpicklingError, match="safetensors"):
        kael.load(path)


def test_map_location():
    buf = io.BytesIO()
    kael.save({"w": kael.ones(2)}, buf)
    for where in (None, "cpu", kael.device("cpu")):
        buf.seek(0)
        assert kael.equal(kael.load(buf, map_location=where)["w"], kael.ones(2))
    if not kael.cuda.is_available():
        buf.seek(0)
        with pytest.raises(RuntimeError, match="CUDA"):
            kael.load(buf, map_location="cuda")
        tb = io.BytesIO()
        torch.save({"w": torch.ones(2)}, tb)
        tb.seek(0)
        with pytest.raises(RuntimeError, match="CUDA"):
            torch.load(tb, map_location="cuda")
    with pytest.raises(TypeError):
        kael.load(io.BytesIO(buf.getvalue()), map_location=lambda s, loc: s)


def test_truncated_and_garbage_files_raise(tmp_path):
    buf = io.BytesIO()
    kael.save({"w": kael.ones(1000)}, buf)
    data = buf.getvalue()
    for cut in (0, 1, 10, len(data) // 2, len(data) - 1):
        with pytest.raises((pickle.UnpicklingError, EOFError, ValueError)):
            kael.load(io.BytesIO(data[:cut]))
    # a tensor whose byte count does not match its shape: a ValueError, not a crash
    from kael._tensor import _rebuild_tensor
    with pytest.raises((ValueError, RuntimeError)):
        _rebuild_tensor(kael.Tensor, "float32", (10,), b"\x00" * 12, {})


def test_hostile_files_in_a_subprocess(tmp_path):
    """Random byte flips of a saved state dict, loaded with the allow-list in a child process:
    exceptions only, never a crash."""
    code = r'''
import io, pickle, random, sys
import kael
from kael import nn
buf = io.BytesIO()
kael.save(nn.Linear(5, 3).state_dict(), buf)
data = bytearray(buf.getvalue())
rng = random.Random(0)
for i in range(400):
    bad = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        bad[rng.randrange(len(bad))] = rng.randrange(256)
    try:
        kael.load(io.BytesIO(bytes(bad)))
    except Exception:
        pass
print("ok")
'''
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_save_refuses_bytes_and_other_pickle_modules():
    with pytest.raises(TypeError):
        kael.save(kael.ones(1), b"path")
    import json
    with pytest.raises(ValueError):
        kael.save(kael.ones(1), io.BytesIO(), pickle_module=json)


def test_crafted_calls_of_allowed_globals_raise():
    """The allow-list's callables with arguments no kael file holds: exceptions, and no huge
    allocation (bytes(n), bytearray(n), an empty tensor's bytes for a huge shape)."""
    def crafted(global_, args):
        return b"\x80\x02c" + global_ + b"\n" + args + b"R."
    cases = [
        crafted(b"__builtin__\nbytes", b"J\x00\x00\x00\x7f\x85"),
        crafted(b"__builtin__\nbytearray", b"J\x00\x00\x00\x7f\x85"),
    ]
    for data in cases:
        with pytest.raises(pickle.UnpicklingError):
            kael.load(io.BytesIO(data))
    # _rebuild_tensor(kael.Tensor, "_set_data_", (), b"", {}): a _C function named as the dtype
    data = (b"\x80\x02ckael._tensor\n_rebuild_tensor\n(ckael\nTensor\nX\x0a\x00\x00\x00_set_data_"
            b")C\x00}tR.")
    with pytest.raises(ValueError, match="unknown dtype '_set_data_'"):
        kael.load(io.BytesIO(data))
    from kael._tensor import _rebuild_tensor
    for args in (("float32", (1 << 40,), b""), ("float32", (-1,), b""), ("zeros", (1,), b"\x00" * 4),
                 ("float32", (2,), "text"), ("float32", [2], b"\x00" * 8), ("float32", (2,), b"\x00" * 4)):
        with pytest.raises((TypeError, ValueError)):
            _rebuild_tensor(kael.Tensor, *args, {})
    with pytest.raises(TypeError):
        _rebuild_tensor(dict, "float32", (1,), b"\x00" * 4, {})
