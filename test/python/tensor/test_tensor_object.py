"""The objects around a tensor that PyTorch code expects (kael.Size, kael.device, kael.cuda,
Tensor attributes and conversions, repr), each compared with what torch does."""
import math
import pickle
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

import kael

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def both(expr):
    """expr evaluated with lib = kael and lib = torch."""
    return eval(expr, {"lib": kael, "np": np}), eval(expr, {"lib": torch, "np": np})


def same_repr(ours, theirs):
    assert repr(ours).replace("kael", "torch") == repr(theirs)


# ------------------------------------------------------------------ kael.Size


@pytest.mark.parametrize("shape", [(), (2,), (2, 3), (0, 4, 1)])
def test_size_is_a_tuple_with_numel_and_torch_repr(shape):
    ours, theirs = kael.zeros(shape).shape, torch.zeros(shape).shape
    assert isinstance(ours, kael.Size) and isinstance(ours, tuple)
    assert ours == theirs == shape
    assert ours.numel() == theirs.numel()
    same_repr(ours, theirs)
    assert kael.zeros(shape).size() == ours and type(kael.zeros(shape).size()) is kael.Size


def test_size_construction_slicing_concat_and_pickle():
    s = kael.Size([2, 3, 4])
    t = torch.Size([2, 3, 4])
    same_repr(s[1:], t[1:])
    same_repr(s + (5,), t + (5,))
    assert type(s[0]) is int and s[-1] == 4
    assert pickle.loads(pickle.dumps(s)) == s and type(pickle.loads(pickle.dumps(s))) is kael.Size
    assert kael.Size((np.int64(2), 3)) == (2, 3)
    with pytest.raises(TypeError, match="item 0 is 'float'"):
        kael.Size([2.5])
    with pytest.raises(TypeError):
        torch.Size([2.5])
    assert kael.zeros(2, 3).new_zeros(kael.Size([4])).shape == (4,)


# ------------------------------------------------------------------ kael.device


@pytest.mark.parametrize("spec", ["cpu", "cuda", "cuda:0", "cuda:1", "cpu:0"])
def test_device_objects_match_torch(spec):
    ours, theirs = kael.device(spec), torch.device(spec)
    assert ours.type == theirs.type and ours.index == theirs.index
    assert str(ours) == str(theirs)
    assert repr(ours) == repr(theirs)
    assert ours == kael.device(spec) and hash(ours) == hash(kael.device(spec))
    assert pickle.loads(pickle.dumps(ours)) == ours


def test_device_with_index_argument_and_errors():
    assert kael.device("cuda", 1) == kael.device("cuda:1")
    assert repr(kael.device("cuda", 0)) == repr(torch.device("cuda", 0))
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda"):
        kael.device("foo")
    with pytest.raises(RuntimeError):
        torch.device("foo")
    with pytest.raises(TypeError):
        kael.device(1.5)


def test_tensor_device_is_a_cached_device_object_equal_to_strings():
    t = kael.zeros(2)
    assert isinstance(t.device, kael.device)
    assert t.device is kael.ones(3).device
    assert str(t.device) == str(torch.zeros(2).device) == "cpu"
    assert repr(t.device) == repr(torch.zeros(2).device)
    # kael also compares a device with a device string (torch answers False here)
    assert t.device == "cpu" and t.device != "cuda" and t.device != "nonsense" and t.device != 3
    assert t.device.type == "cpu" and t.device.index is None


def test_device_objects_are_accepted_where_device_strings_are():
    t = kael.ones(2)
    assert t.to(kael.device("cpu")) is t
    assert kael.zeros(2, device=kael.device("cpu")).device == "cpu"
    assert kael.zeros(2, device=t.device).device == "cpu"


def test_cuda_module_without_a_cuda_backend():
    assert kael.cuda.is_available() is torch.cuda.is_available() is False
    assert kael.cuda.device_count() == torch.cuda.device_count() == 0
    assert kael.cuda_is_available() is False
    with pytest.raises(RuntimeError, match="CUDA"):
        kael.zeros(2).cuda()


# ------------------------------------------------------------------ attributes


@pytest.mark.parametrize("dtype", DTYPES)
def test_sizes_and_type_names_per_dtype(dtype):
    ours, theirs = kael.zeros(2, 3, dtype=getattr(kael, dtype)), torch.zeros(2, 3, dtype=getattr(torch, dtype))
    assert ours.element_size() == theirs.element_size()
    assert ours.itemsize == theirs.itemsize
    assert ours.nbytes == theirs.nbytes
    assert ours.is_floating_point() == theirs.is_floating_point()
    assert ours.type() == theirs.type().replace("torch", "kael")


def test_type_converts_to_a_dtype_or_type_name():
    t = kael.tensor([1.5, -2.0])
    assert t.type(kael.float32) is t
    assert t.type(kael.int64).dtype == kael.int64
    assert t.type(kael.int64).tolist() == torch.tensor([1.5, -2.0]).type(torch.int64).tolist()
    assert t.type("kael.DoubleTensor").dtype == kael.float64
    with pytest.raises(ValueError):
        t.type("kael.NoSuchTensor")


def test_data_ptr_storage_offset_and_untyped_storage():
    base = kael.arange(12.0).reshape(3, 4)
    view = base[1:, 2:]
    tbase = torch.arange(12.0).reshape(3, 4)
    assert view.storage_offset() == tbase[1:, 2:].storage_offset() == 6
    assert view.data_ptr() == base.data_ptr() + 6 * 4
    s = view.untyped_storage()
    assert s.data_ptr() == base.data_ptr() == base.untyped_storage().data_ptr()
    assert s.nbytes() == len(s) == s.size() == tbase[1:, 2:].untyped_storage().nbytes() == 48
    assert s.device == "cpu" and s.element_size() == 1
    assert s.tolist() == list(tbase.numpy().tobytes())
    assert s[4] == tbase.untyped_storage()[4]
    del base, view
    assert s.tolist()[4:8] == list(np.float32(1.0).tobytes())  # the storage stays alive


def test_data_shares_memory_and_can_be_replaced():
    t = kael.ones(3)
    d = t.data
    assert d.data_ptr() == t.data_ptr() and d is not t
    d.add_(1)
    assert t.tolist() == [2.0, 2.0, 2.0]
    t.data = kael.zeros(2)
    assert t.tolist() == [0.0, 0.0] and t.shape == (2,)
    with pytest.raises(TypeError):
        t.data = kael.zeros(2, dtype=kael.int64)


@pytest.mark.parametrize("shape", [(2, 3), (4, 2, 3), (1, 0, 5), (2, 1, 3, 4)])
@pytest.mark.parametrize("call", ["method", "function"])
def test_adjoint_is_a_registry_view_like_torch(shape, call):
    t = torch.arange(float(math.prod(shape))).reshape(shape).requires_grad_()
    k = kael.tensor(t.detach().numpy()).requires_grad_()
    tr = t.adjoint() if call == "method" else torch.adjoint(t)
    kr = k.adjoint() if call == "method" else kael.adjoint(k)
    assert kr.shape == tr.shape and kr.stride() == tr.stride() and kr._base is k
    assert kr.tolist() == tr.tolist()
    weights = torch.randn(tr.shape)
    (tr * weights).sum().backward()
    (kr * kael.tensor(weights.numpy())).sum().backward()
    assert k.grad.tolist() == t.grad.tolist()


def test_adjoint_of_0d_and_1d_tensors_as_torch():
    for lib in (torch, kael):
        with pytest.raises(RuntimeError, match=r"tensor\.adjoint\(\) is only supported on matrices or batches of "
                                               r"matrices\. Got 1-D tensor\."):
            lib.ones(3).adjoint()
    # 0-d: the tensor itself, with torch's deprecation warning once per process
    code = ("import warnings, kael\nwarnings.simplefilter('always')\nt = kael.tensor(2.0)\n"
            "with warnings.catch_warnings(record=True) as w:\n    warnings.simplefilter('always')\n"
            "    r = t.adjoint(); r2 = kael.adjoint(t)\n"
            "print(r is t, r2 is t, [str(x.message) for x in w])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "True True ['adjoint() is deprecated on 0-D tensors. Consider using x.conj().']", \
        out.stdout + out.stderr


def test_H_mH_and_adjoint_match_torch():
    a = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert kael.tensor(a).H.tolist() == torch.tensor(a).H.tolist()
    assert kael.tensor([a, a]).mH.tolist() == torch.tensor([a, a]).mH.tolist()
    assert kael.tensor(a).adjoint().tolist() == torch.tensor(a).adjoint().tolist()
    with pytest.raises(RuntimeError, match="only supported on matrices"):
        kael.ones(3).H
    with pytest.raises(RuntimeError, match="only supported on matrices"):
        torch.ones(3).H


@pytest.mark.parametrize("dtype", ["float32", "int64", "float16", "bool"])
def test_new_factories_take_dtype_and_device_from_self(dtype):
    ours = kael.ones(2, dtype=getattr(kael, dtype))
    theirs = torch.ones(2, dtype=getattr(torch, dtype))
    for name, args in [("new_zeros", (2, 3)), ("new_ones", ((2, 3),)), ("new_empty", (4,)),
                       ("new_full", ((2,), 1)), ("new_tensor", ([1, 0, 1],))]:
        a, b = getattr(ours, name)(*args), getattr(theirs, name)(*args)
        assert a.shape == b.shape and str(a.dtype) == str(b.dtype).replace("torch", "kael"), name
        if name != "new_empty":
            assert a.tolist() == b.tolist(), name
    assert ours.new_zeros(2, dtype=kael.float64).dtype == kael.float64
    with pytest.warns(UserWarning, match="detach"):
        copied = ours.new_tensor(ours)
    assert copied.data_ptr() != ours.data_ptr()


# ------------------------------------------------------------------ to(...)


def test_to_accepts_any_mix_of_dtype_device_and_tensor():
    t = kael.tensor([1.5, 2.5])
    other = kael.zeros(1, dtype=kael.float64)
    assert t.to(kael.float32) is t
    assert t.to(kael.float64).dtype == kael.float64
    assert t.to("cpu") is t
    assert t.to("cpu", kael.int64).tolist() == [1, 2]
    assert t.to(device="cpu", dtype=kael.int64).dtype == kael.int64
    assert t.to(dtype=kael.float16).dtype == kael.float16
    assert t.to(other).dtype == kael.float64
    assert t.to(kael.device("cpu"), kael.float64).dtype == kael.float64
    assert t.to(kael.float32, copy=True) is not t


@pytest.mark.parametrize("bad", [[1], 3.5, object(), None])
def test_to_rejects_anything_else_with_a_type_error(bad):
    with pytest.raises(TypeError, match="to\\(\\) expects a dtype, a device name or a tensor"):
        kael.ones(2).to(bad)
    if isinstance(bad, list) or type(bad) is object:  # (torch reads a float or None as a device index)
        with pytest.raises(TypeError):
            torch.ones(2).to(bad)


# ------------------------------------------------------------------ repr


REPR_CASES = [
    "lib.tensor([-1.2345 + i for i in range(7)], dtype=lib.float64)",
    "lib.tensor([-1.2345 + i for i in range(6)], dtype=lib.float64)",
    "lib.tensor([1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5], dtype=lib.float16)",
    "lib.tensor([[1e-5, 2.0], [3.0, 4e9]], dtype=lib.float64)",
    "lib.arange(2000, dtype=lib.int32)",
    "lib.arange(3000.0).reshape(30, 100)",
    "lib.zeros(0, 3, dtype=lib.int16)",
    "lib.zeros(0, dtype=lib.float64)",
    "lib.tensor(3.25, dtype=lib.bfloat16)",
    "lib.tensor([True, False])",
    "lib.tensor([[1, 2], [300000, 4]], dtype=lib.int8 if False else lib.int32)",
    "lib.tensor([123456789.0, 1.0], dtype=lib.float64)",
    "lib.arange(24, dtype=lib.uint8).reshape(2, 3, 4)",
]


@pytest.mark.parametrize("expr", REPR_CASES)
def test_repr_matches_torch_exactly(expr):
    ours, theirs = both(expr)
    assert repr(ours).replace("kael.", "torch.") == repr(theirs)
    assert str(ours).replace("kael.", "torch.") == str(theirs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_repr_of_every_dtype(dtype):
    values = [0, 1, 2, 3] if dtype != "bool" else [True, False, True, True]
    ours = kael.tensor(values, dtype=getattr(kael, dtype))
    theirs = torch.tensor(values, dtype=getattr(torch, dtype))
    assert repr(ours).replace("kael.", "torch.") == repr(theirs)


def test_dtype_line_wraps_past_80_characters():
    text = repr(kael.tensor([-1.2345 + i for i in range(7)], dtype=kael.float64))
    assert text.endswith(",\n       dtype=kael.float64)")
    assert max(len(line) for line in text.splitlines()) <= 80


# ------------------------------------------------------------------ the namespace


def test_dir_and_all_hold_the_public_api_only():
    public = [name for name in dir(kael) if not name.startswith("_")]
    for leaked in ("annotations", "builtins", "ctypes", "os", "sys"):
        assert leaked not in public
    assert len(kael.__all__) == len(set(kael.__all__))
    for name in kael.__all__:
        assert not name.startswith("_") and hasattr(kael, name), name
    for name in ("Tensor", "Size", "device", "dtype", "tensor", "from_numpy", "from_dlpack", "as_tensor", "asarray",
                 "float32", "zeros", "cuda", "is_tensor", "manual_seed"):
        assert name in kael.__all__, name
    namespace = {}
    exec("from kael import *", namespace)
    assert "Size" in namespace and "annotations" not in namespace


def test_as_tensor_and_asarray_share_when_they_can():
    a = np.arange(4.0)
    t = kael.as_tensor(a)
    assert t.data_ptr() == a.ctypes.data
    assert kael.as_tensor(a, dtype=kael.float32).dtype == kael.float32
    assert kael.as_tensor([1, 2]).tolist() == torch.as_tensor([1, 2]).tolist()
    base = kael.ones(3)
    assert kael.as_tensor(base) is base
    assert kael.asarray(base) is base
    assert kael.asarray(base, copy=True).data_ptr() != base.data_ptr()
    assert kael.asarray(a).data_ptr() == a.ctypes.data
    assert kael.asarray(a, copy=True).data_ptr() != a.ctypes.data
    with pytest.raises(ValueError, match="copy=False"):
        kael.asarray(base, dtype=kael.float64, copy=False)
    with pytest.raises(ValueError):
        torch.asarray(torch.ones(3), dtype=torch.float64, copy=False)
    assert kael.asarray([[1, 2], [3, 4]]).tolist() == torch.asarray([[1, 2], [3, 4]]).tolist()
    assert str(kael.asarray([1.5]).dtype) == str(torch.asarray([1.5]).dtype).replace("torch", "kael")
    assert re.match(r"kael\.float64", str(kael.asarray(a).dtype))
