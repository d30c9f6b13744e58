"""torch's legacy names in kael: the typed tensor constructors (kael.FloatTensor, ...),
isinstance against them, Tensor.type() and conversions by legacy type, and
kael.autograd.Variable, each against torch 2.13 (docs/decisions/namespaces.md)."""
import warnings

import numpy as np
import pytest
import torch

import kael

NAMES = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor",
         "CharTensor", "ByteTensor", "BoolTensor"]
DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"]


def _kname(td) -> str:
    return str(td).replace("torch.", "kael.")


@pytest.mark.parametrize("name", NAMES)
def test_constructor_shapes_and_dtypes(name):
    T, K = getattr(torch, name), getattr(kael, name)
    assert _kname(K.dtype) == _kname(T.dtype)
    for args in [(), (2, 3), (4,), (3, 0), (0,)]:
        t, k = T(*args), K(*args)
        assert type(k) is kael.Tensor
        assert tuple(k.shape) == tuple(t.shape) and str(k.dtype) == _kname(t.dtype), args
    t, k = T(torch.Size([2, 5])), K(kael.Size([2, 5]))
    assert tuple(k.shape) == tuple(t.shape)
    assert K(2, device="cpu").device.type == "cpu"


@pytest.mark.parametrize("name", NAMES)
def test_constructor_copies_data(name):
    T, K = getattr(torch, name), getattr(kael, name)
    for data in [[1, 2], [[1, 0, 3]], (1, 2), [], [True, False], [1.5, -2.25], [-1], [300], np.array([3, 4]), [[]]]:
        try:
            t = T(data)
        except RuntimeError:  # a value the dtype cannot hold: torch's error, as kael's
            with pytest.raises(RuntimeError):
                K(data)
            continue
        k = K(data)
        assert tuple(k.shape) == tuple(t.shape) and str(k.dtype) == _kname(t.dtype)
        assert k.float().tolist() == t.float().tolist(), data
    # data is copied
    src = np.array([1, 2], dtype=np.float32)
    k = K(src)
    src[0] = 9
    assert k[0].item() == 1


def test_constructor_from_a_tensor_shares_it():
    t = torch.nn.Parameter(torch.ones(3))
    k = kael.nn.Parameter(kael.ones(3))
    tt, kk = torch.FloatTensor(t), kael.FloatTensor(k)
    assert (tt is t, type(tt).__name__, tt.requires_grad) == (kk is k, type(kk).__name__, kk.requires_grad)
    assert kk.data_ptr() == k.data_ptr()
    kk.sum().backward()
    assert k.grad.tolist() == [1.0, 1.0, 1.0]


def _raises(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e)
    return None


@pytest.mark.parametrize("bad", [
    ("str data", lambda lib: lib.FloatTensor("x")),
    ("float scalar", lambda lib: lib.FloatTensor(2.5)),
    ("bool scalar", lambda lib: lib.FloatTensor(True)),
    ("size with a float", lambda lib: lib.FloatTensor(5, 6, 7.0)),
    ("size with a str", lambda lib: lib.FloatTensor(2, "a")),
    ("tensor of another dtype", lambda lib: lib.FloatTensor(lib.ones(2, dtype=lib.int64))),
    ("dtype keyword", lambda lib: lib.FloatTensor(2, dtype=lib.float64)),
    ("requires_grad keyword", lambda lib: lib.FloatTensor([1.0], requires_grad=True)),
    ("cuda device", lambda lib: lib.FloatTensor([1.0], device="cuda")),
    ("cuda type", lambda lib: lib.cuda.FloatTensor(2)),
])
def test_constructor_errors_match_torch(bad):
    _, fn = bad
    assert _raises(lambda: fn(kael)) is _raises(lambda: fn(torch)) is not None


def test_negative_size_raises():
    with pytest.raises(RuntimeError):
        torch.FloatTensor(-1)
    with pytest.raises(RuntimeError, match="negative dimension"):
        kael.FloatTensor(-1)


def test_isinstance_as_torch():
    for dtype in DTYPES:
        t, k = torch.zeros(2, dtype=getattr(torch, dtype)), kael.zeros(2, dtype=getattr(kael, dtype))
        for name in NAMES:
            assert isinstance(k, getattr(kael, name)) == isinstance(t, getattr(torch, name)), (dtype, name)
            assert isinstance(k, getattr(kael.cuda, name)) == isinstance(t, getattr(torch.cuda, name)) is False
    assert isinstance(kael.nn.Parameter(kael.ones(1)), kael.FloatTensor)
    assert not isinstance(np.ones(1, np.float32), kael.FloatTensor)
    assert not isinstance(3.0, kael.FloatTensor)
    assert issubclass(kael.FloatTensor, kael.Tensor) == issubclass(torch.FloatTensor, torch.Tensor)
    assert repr(kael.FloatTensor) == repr(torch.FloatTensor).replace("torch", "kael")
    assert repr(kael.cuda.LongTensor) == repr(torch.cuda.LongTensor).replace("torch", "kael")
    for attr in ("is_cuda", "is_sparse"):
        assert getattr(kael.FloatTensor, attr) == getattr(torch.FloatTensor, attr)


def test_type_names_and_conversions():
    for dtype, name in zip(DTYPES, NAMES):
        t, k = torch.zeros(2, dtype=getattr(torch, dtype)), kael.zeros(2, dtype=getattr(kael, dtype))
        # kael keeps its own prefix in type names (docs/decisions/namespaces.md)
        assert k.type() == t.type().replace("torch.", "kael.") == f"kael.{name}"
        for target in NAMES:
            tt, kk = t.type(getattr(torch, target)), k.type(getattr(kael, target))
            assert str(kk.dtype) == _kname(tt.dtype)
            assert (kk is k) == (tt is t), (dtype, target)
            assert str(k.type(f"kael.{target}").dtype) == _kname(t.type(f"torch.{target}").dtype)
        assert str(k.type(kael.float64).dtype) == "kael.float64"
    k = kael.tensor([1.7, -2.2])
    assert k.type(kael.LongTensor).tolist() == torch.tensor([1.7, -2.2]).type(torch.LongTensor).tolist()
    for bad in ["Long", "torch.LongTensor", "kael.Nope"]:
        assert _raises(lambda: k.type(bad)) is ValueError
    assert _raises(lambda: kael.ones(1).type(5)) is _raises(lambda: torch.ones(1).type(5)) is TypeError


def test_variable_returns_a_tensor():
    from torch.autograd import Variable as TV

    from kael.autograd import Variable as KV
    from kael.autograd.variable import Variable as KV2

    assert KV is KV2 is kael.autograd.Variable
    for lib, V in ((torch, TV), (kael, KV)):
        t = lib.ones(2)
        v = V(t, requires_grad=True)
        assert type(v) is lib.Tensor and v is not t
        assert v.requires_grad and v.is_leaf and t.requires_grad is False
        v2 = V(t)
        v2[0] = 5
        assert t[0].item() == 5  # same storage
        assert t._version == v2._version
        p = lib.nn.Parameter(lib.ones(2))
        y = V(p * 2)
        assert (y.requires_grad, y.grad_fn, y.is_leaf) == (False, None, True)
        assert isinstance(t, V) and isinstance(p, V) and not isinstance([1], V)
        assert V().shape == (0,) and V().dtype == lib.float32
        assert V(t, True).requires_grad
    assert KV.__name__ == TV.__name__
    for call in [lambda V, lib: V([1.0]), lambda V, lib: V(lib.ones(2), foo=1),
                 lambda V, lib: V(lib.ones(2), requires_grad="x"),
                 lambda V, lib: V(lib.ones(2, dtype=lib.int64), requires_grad=True)]:
        assert _raises(lambda: call(KV, kael)) is _raises(lambda: call(TV, torch)) is not None
    caught = []
    for lib, V in ((torch, TV), (kael, KV)):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            V(lib.ones(1), volatile=True)
        caught.append([(x.category, str(x.message).replace("torch.", "kael."), x.filename) for x in w])
    assert caught[0] == caught[1]


def test_set_default_tensor_type_as_torch():
    saved = torch.get_default_dtype(), kael.get_default_dtype()
    try:
        cases = [lambda lib: lib.DoubleTensor, lambda lib: f"{lib.__name__}.FloatTensor", lambda lib: lib.HalfTensor,
                 lambda lib: lib.LongTensor, lambda lib: f"{lib.__name__}.IntTensor", lambda lib: lib.float64,
                 lambda lib: 5, lambda lib: lib.cuda.FloatTensor, lambda lib: "Float", lambda lib: lib.BFloat16Tensor]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for case in cases:
                outcome = []
                for lib in (torch, kael):
                    try:
                        lib.set_default_tensor_type(case(lib))
                        outcome.append(("ok", _kname(lib.get_default_dtype()), _kname(lib.ones(1).dtype)))
                    except Exception as e:  # noqa: BLE001
                        outcome.append(("raise", type(e), _kname(lib.get_default_dtype())))
                assert outcome[0] == outcome[1], case(torch)
    finally:
        torch.set_default_dtype(saved[0])
        kael.set_default_dtype(saved[1])


def test_set_default_tensor_type_warns_once_per_process(monkeypatch):
    # torch warns once per process (TORCH_WARN_ONCE); kael's flag is reset here to see it
    import kael._legacy

    monkeypatch.setattr(kael._legacy, "_warned_default_tensor_type", False)
    try:
        with pytest.warns(UserWarning, match="set_default_tensor_type.. is deprecated"):
            kael.set_default_tensor_type(kael.FloatTensor)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            kael.set_default_tensor_type(kael.FloatTensor)
    finally:
        kael.set_default_dtype(kael.float32)
