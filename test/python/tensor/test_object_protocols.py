"""The Python object protocols of kael.Tensor against torch: foreign operands, NumPy operands,
hashing, conversions, kael.Tensor(other), weak references, subclasses and __kael_function__,
copy and pickle."""
import copy
import gc
import pickle
import weakref

import numpy as np
import pytest
import torch

import kael


# ------------------------------------------------------------------ operands


@pytest.mark.parametrize("other", ["x", [1, 2], (1,), object(), {1: 2}])
def test_foreign_operands_give_type_errors(other):
    for lib in (kael, torch):
        t = lib.ones(2)
        with pytest.raises(TypeError):
            t + other
        with pytest.raises(TypeError):
            other * t if not isinstance(other, (list, tuple)) else t - other
    assert (kael.ones(2) == "x") is False
    assert (kael.ones(2) != "x") is True


@pytest.mark.parametrize("scalar", [np.float64(2.5), np.int64(3), np.float32(2), np.int32(-4), np.bool_(True)])
def test_numpy_scalars_on_either_side_match_torch(scalar):
    for expr in ("t + s", "s + t", "t * s", "s - t", "t / s", "s ** t", "t > s"):
        ours = eval(expr, {"t": kael.tensor([1.0, 2.0]), "s": scalar})
        theirs = eval(expr, {"t": torch.tensor([1.0, 2.0]), "s": scalar})
        assert isinstance(ours, kael.Tensor), expr
        assert ours.tolist() == theirs.tolist(), expr
        assert str(ours.dtype)[5:] == str(theirs.dtype)[6:], expr


def test_numpy_array_on_the_left_does_not_make_object_arrays():
    t = kael.ones(2)
    with pytest.raises(TypeError):
        np.ones(2) + t
    with pytest.raises(TypeError):
        np.ones(2) * t
    assert t.__array_priority__ > 0


def test_hash_is_identity():
    a, b = kael.ones(2), kael.ones(2)
    assert hash(a) == hash(a) and hash(a) != hash(b)
    assert len({a, b, a}) == 2
    assert {a: 1}[a] == 1


def test_bool_int_float_index_rules_match_torch():
    for lib in (kael, torch):
        with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
            bool(lib.ones(2))
    assert bool(kael.tensor([0.0])) is False and bool(kael.tensor(3)) is True
    assert int(kael.tensor(2**62 + 1)) == 2**62 + 1
    assert int(kael.tensor(-2.7)) == int(torch.tensor(-2.7)) == -2
    assert float(kael.tensor(1.5, dtype=kael.float64)) == 1.5
    assert [10, 20, 30][kael.tensor(2)] == 30
    with pytest.raises(TypeError):
        [1, 2][kael.tensor(1.0)]
    with pytest.raises(TypeError):
        [1, 2][torch.tensor(1.0)]
    with pytest.raises(TypeError):
        len(kael.tensor(1.0))
    with pytest.raises(TypeError):
        iter(kael.tensor(1.0))
    rows = list(kael.arange(6.0).reshape(3, 2))
    assert [r.tolist() for r in rows] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    rows[0].fill_(7)


def test_in_place_operators_keep_identity():
    x = kael.ones(2)
    y = x
    x += 1
    x *= 2
    x -= 1
    assert x is y and x.add_(1) is x and x.mul_(2).add_(1) is x
    assert x.tolist() == [9.0, 9.0]


def test_tensor_of_a_tensor_is_a_second_handle():
    x = kael.ones(2)
    y = kael.Tensor(x)
    assert y is not x
    y.add_(1)
    assert x.tolist() == [2.0, 2.0]
    with pytest.raises(TypeError):
        kael.Tensor([1, 2])


# ------------------------------------------------------------------ weak references


def test_weakref_dies_with_the_last_owner():
    t = kael.ones(2)
    r = weakref.ref(t)
    assert r() is t
    del t
    gc.collect()
    assert r() is None


def test_weak_key_dictionary_and_finalize():
    # WeakKeyDictionary compares keys with ==, elementwise for tensors: it works for one-element
    # tensors and is ambiguous for larger ones, in torch as in kael (kael.utils.weak has the
    # identity-keyed dictionary for those)
    for lib in (kael, torch):
        d = weakref.WeakKeyDictionary()
        t, big = lib.ones(1), lib.ones(2)
        d[t] = "payload"
        d[big] = "big"
        calls = []
        weakref.finalize(t, calls.append, "done")
        assert d[t] == "payload"
        with pytest.raises(RuntimeError, match="ambiguous"):
            d[big]
        del t, big
        gc.collect()
        assert len(d) == 0 and calls == ["done"]
    from kael.utils.weak import WeakIdKeyDictionary
    d = WeakIdKeyDictionary()
    big = kael.ones(3)
    d[big] = "big"
    assert d[big] == "big"
    del big
    gc.collect()
    assert len(d) == 0


def test_dead_weakref_never_resurrects():
    # A view holds its base's impl, and the impl keeps the base's object (PyObject preservation,
    # as in torch): the weak reference stays alive with the view and dies with it, for good.
    for lib in (kael, torch):
        t = lib.ones(2)
        r = weakref.ref(t)
        impl_owner = t[0:1]
        del t
        gc.collect()
        assert r() is impl_owner._base
        assert impl_owner.tolist() == [1.0]
        del impl_owner
        gc.collect()
        assert r() is None
        lib.ones(2)[0:1]  # a new tensor and view do not bring it back
        assert r() is None


def test_same_impl_same_object_while_alive():
    x = kael.ones(3)
    view = x[1:]
    assert view._base is x and view._base is view._base
    assert x.add_(1) is x
    assert kael.add(x, 0, out=x) is x


# ------------------------------------------------------------------ subclasses


class Plain(kael.Tensor):
    pass


class Keeps(kael.Tensor):
    calls = []

    @classmethod
    def __kael_function__(cls, func, types, args=(), kwargs=None):
        Keeps.calls.append(getattr(func, "__name__", str(func)))
        return super().__kael_function__(func, types, args, kwargs)


class Logger:
    """Not a tensor: dispatched to because it defines __kael_function__."""

    @classmethod
    def __kael_function__(cls, func, types, args=(), kwargs=None):
        return ("handled", func.__name__, len(args), sorted((kwargs or {}).keys()))


def test_subclass_keeps_its_type_through_identity_returning_calls():
    p = Plain(kael.ones(2))
    p.tag = "mine"
    assert type(p) is Plain and p.add_(1) is p
    assert p.tag == "mine" and p.tolist() == [2.0, 2.0]


def test_operations_on_a_plain_subclass_return_plain_tensors():
    p = Plain(kael.ones(2))
    assert type(p + 1) is kael.Tensor and type(kael.add(p, p)) is kael.Tensor and type(p.exp()) is kael.Tensor


def test_kael_function_keeps_type_through_functions_and_methods():
    Keeps.calls.clear()
    k = Keeps(kael.ones(2))
    assert type(kael.add(k, 1)) is Keeps
    assert type(k.exp()) is Keeps
    assert type(kael.cat([k, k])) is Keeps
    assert k.sum().tolist() == 2.0
    assert "add" in Keeps.calls and "exp" in Keeps.calls and "cat" in Keeps.calls


def test_kael_function_is_honoured_by_operators():
    Keeps.calls.clear()
    k = Keeps(kael.ones(2))
    assert type(k + 1) is Keeps and type(1 - k) is Keeps and type(k * k) is Keeps and type(k @ k) is Keeps
    assert type(k > 0) is Keeps
    same = k
    k += 1
    assert k is same and k.tolist() == [2.0, 2.0]
    assert {"add", "sub", "mul", "matmul", "gt", "add_"} <= set(Keeps.calls)
    assert (kael.ones(1) + Logger())[:2] == ("handled", "add")


def test_torch_subclass_convention_matches():
    class T(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return super().__torch_function__(func, types, args, kwargs)

    class K(kael.Tensor):
        @classmethod
        def __kael_function__(cls, func, types, args=(), kwargs=None):
            return super().__kael_function__(func, types, args, kwargs)

    t = torch.ones(2).as_subclass(T)
    k = kael.ones(2).as_subclass(K)
    assert type(torch.add(t, 1)).__name__ == "T" and type(kael.add(k, 1)).__name__ == "K"
    assert torch.add(t, 1).tolist() == kael.add(k, 1).tolist()


def test_non_tensor_objects_with_kael_function_are_dispatched_to():
    assert kael.add(Logger(), 1) == ("handled", "add", 2, [])
    assert kael.add(kael.ones(1), Logger(), alpha=2) == ("handled", "add", 2, ["alpha"])


def test_not_implemented_everywhere_is_a_type_error():
    class Refuses:
        @classmethod
        def __kael_function__(cls, func, types, args=(), kwargs=None):
            return NotImplemented

    with pytest.raises(TypeError, match="no implementation found for 'kael.add'"):
        kael.add(Refuses(), 1)


def test_exceptions_in_overrides_propagate_unchanged():
    class Boom:
        @classmethod
        def __kael_function__(cls, func, types, args=(), kwargs=None):
            raise FileNotFoundError("mine")

    with pytest.raises(FileNotFoundError, match="mine"):
        kael.exp(Boom())


# ------------------------------------------------------------------ copy and pickle


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool", "float16", "bfloat16", "uint8", "int32"])
def test_pickle_and_deepcopy_round_trip(dtype):
    base = torch.arange(6).reshape(2, 3).to(getattr(torch, dtype))
    t = kael.tensor(base.tolist(), dtype=getattr(kael, dtype))[:, 1:]
    for copied in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):
        assert copied.dtype == t.dtype and copied.shape == t.shape and copied.tolist() == t.tolist()
        assert copied.data_ptr() != t.data_ptr()


def test_pickle_of_empty_and_0d_and_subclass():
    for t in (kael.zeros(0, 3), kael.tensor(2.5)):
        back = pickle.loads(pickle.dumps(t))
        assert back.shape == t.shape and back.tolist() == t.tolist()
    p = Plain(kael.ones(2))
    p.note = [1, 2]
    back = pickle.loads(pickle.dumps(p))
    assert type(back) is Plain and back.note == [1, 2] and back.tolist() == [1.0, 1.0]
    deep = copy.deepcopy(p)
    assert type(deep) is Plain and deep.note == [1, 2] and deep.note is not p.note


def test_deepcopy_keeps_shared_references_shared():
    t = kael.ones(2)
    a, b = copy.deepcopy([t, t])
    assert a is b and a is not t


# ------------------------------------------------------------------ GIL


def test_gil_is_released_during_large_pointwise_ops():
    import threading

    a = kael.ones(1 << 24)
    done = threading.Event()
    out = {}

    def work():
        r = a
        for _ in range(6):
            r = r * 1.0 + 0.0
        out["value"] = r[5].item()
        done.set()

    thread = threading.Thread(target=work)
    thread.start()
    count = 0
    while not done.is_set():
        count += 1
    thread.join()
    assert out["value"] == 1.0
    assert count > 100, f"the main thread ran only {count} iterations while the pointwise ops ran"


def test_gil_release_threshold_is_documented():
    import pathlib
    decisions = (pathlib.Path(__file__).resolve().parents[3] / "docs" / "decisions" / "tensor-object.md").read_text()
    assert "kGilReleaseElements" in decisions and "65536" in decisions


# ------------------------------------------------------------------ warnings


def test_cpp_warnings_are_user_warnings_that_filters_can_turn_into_errors():
    import warnings
    out = kael.zeros(3)
    with pytest.warns(UserWarning, match="resized"):
        kael.add(kael.ones(2), 1, out=out)
    assert out.tolist() == [2.0, 2.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="resized"):
            kael.add(kael.ones(2), 1, out=kael.zeros(3))
    with pytest.warns(UserWarning, match="resized"):
        kael.matmul(kael.ones(2, 2), kael.ones(2, 2), out=kael.zeros(3))
