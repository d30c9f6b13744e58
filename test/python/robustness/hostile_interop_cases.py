"""Hostile input for indexing (_index, index_put_, keys whose __index__ misbehaves) and for the
NumPy/DLPack entry points (lying DLPack producers, garbage keyword arguments). Run as a child
process by test_hostile_interop.py, since a mistake here crashes the interpreter:

    python hostile_interop_cases.py   ->  prints repr({case: ("ok", detail) | ("raised", class name, message)})
"""
import ctypes
import sys

import numpy as np

import kael

CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


# ------------------------------------------------------------------ indexing kernels


@case
def index_put_huge_index():
    kael.zeros(3).index_put_((kael.tensor([2 ** 62]),), kael.tensor([1.0]))


@case
def index_put_negative_beyond_range():
    kael.zeros(3).index_put_((kael.tensor([-4]),), kael.tensor([1.0]))


@case
def index_put_int64_min():
    kael.zeros(3).index_put_((kael.tensor([-2 ** 63]),), kael.tensor([1.0]))


@case
def index_put_mismatched_index_shapes():
    kael.zeros(3, 3).index_put_((kael.tensor([0, 1]), kael.tensor([0, 1, 2])), kael.tensor(1.0))


@case
def index_put_values_do_not_broadcast():
    kael.zeros(3, 3).index_put_((kael.tensor([0, 1]),), kael.ones(4))


@case
def index_put_float_index():
    kael.zeros(3).index_put_((kael.tensor([0.0]),), kael.tensor([1.0]))


@case
def index_put_non_tensor_indices():
    kael.zeros(3).index_put_((None, 1, "x"), kael.tensor([1.0]))


@case
def index_put_too_many_indices():
    kael.zeros(3).index_put_(tuple(kael.tensor([0]) for _ in range(100)), kael.tensor([1.0]))


@case
def index_put_mask_wrong_shape():
    kael.zeros(3, 2).index_put_((kael.tensor([True, False]),), kael.tensor(1.0))


@case
def index_put_dtype_mismatch():
    kael.zeros(3).index_put_((kael.tensor([0]),), kael.tensor([1]))


@case
def index_gather_huge_and_negative():
    t = kael.arange(4.0)
    for bad in ([4], [-5], [2 ** 63 - 1], [-2 ** 63]):
        try:
            t[kael.tensor(bad)]
        except IndexError:
            continue
        raise AssertionError(f"no IndexError for {bad}")
    return "all IndexError"


@case
def index_registry_op_garbage():
    f = getattr(kael, "_index", None) or getattr(kael._C, "_index")
    for args in ((kael.zeros(2), None), (kael.zeros(2), [None]), (kael.zeros(2), [kael.zeros(1)]),
                 (kael.zeros(2), [[0]]), (None, [kael.tensor([0])])):
        try:
            f(*args)
        except (TypeError, IndexError, ValueError):
            continue
        raise AssertionError(f"_index{args!r} did not raise")
    return "all raised"


# ------------------------------------------------------------------ keys that misbehave


@case
def index_dunder_resizes_the_tensor():
    t = kael.arange(6.0).reshape(2, 3)

    class Shrink:
        def __index__(self):
            t.data = kael.zeros(0)
            return 1

    return t[Shrink(), 1].tolist()


@case
def index_dunder_resizes_the_tensor_on_assignment():
    t = kael.arange(6.0).reshape(2, 3)

    class Shrink:
        def __index__(self):
            t.data = kael.zeros(1, 1)
            return 1

    t[Shrink(), 2] = 5.0


@case
def index_dunder_clears_the_list_key():
    t = kael.arange(5.0)
    key = [0, 1, 2]

    class Clear:
        def __index__(self):
            key.clear()
            return 3

    key.append(Clear())
    key.extend([4] * 10)
    return t[key].tolist()


@case
def index_dunder_raises():
    class Boom:
        def __index__(self):
            raise KeyError("from __index__")

    kael.zeros(3)[Boom()]


@case
def index_dunder_returns_huge():
    class Huge:
        def __index__(self):
            return 2 ** 100

    kael.zeros(3)[Huge()]


@case
def slice_bound_mutates_the_tensor():
    t = kael.arange(6.0)

    class Bound:
        def __index__(self):
            t.data = kael.zeros(2)
            return 1

    return t[Bound():].tolist()


@case
def value_float_mutates_the_tensor():
    t = kael.arange(6.0)

    class Value:
        def __float__(self):
            t.data = kael.zeros(1)
            return 2.0

    t[kael.tensor([0, 5])] = Value()
    return t.tolist()


# ------------------------------------------------------------------ DLPack producers that lie

_NAME = b"dltensor"
_NAME_V = b"dltensor_versioned"
_KEEP = []  # the structures and buffers the fake capsules point at


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


def fake_capsule(shape=(4,), strides=None, code=2, bits=64, lanes=1, device=1, data=True, ndim=None,
                 versioned=False, major=1, null_shape=False):
    buffer = (ctypes.c_double * 8)(*range(8))
    shape_arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    strides_arr = None if strides is None else (ctypes.c_int64 * max(len(strides), 1))(*strides)
    managed = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    if versioned:
        managed.major, managed.minor = major, 0
    dl = managed.dl_tensor
    dl.data = ctypes.addressof(buffer) if data else None
    dl.device = DLDevice(device, 0)
    dl.ndim = len(shape) if ndim is None else ndim
    dl.dtype = DLDataType(code, bits, lanes)
    dl.shape = None if null_shape else ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    dl.strides = None if strides_arr is None else ctypes.cast(strides_arr, ctypes.POINTER(ctypes.c_int64))
    _KEEP.extend([buffer, shape_arr, strides_arr, managed])
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(managed), _NAME_V if versioned else _NAME, None)


class Producer:
    def __init__(self, capsule_or_fn, device=(1, 0)):
        self._make = capsule_or_fn if callable(capsule_or_fn) else (lambda: capsule_or_fn)
        self._device = device

    def __dlpack__(self, stream=None, **kwargs):
        return self._make()

    def __dlpack_device__(self):
        return self._device


@case
def dlpack_honest_fake_imports():
    return kael.from_dlpack(Producer(lambda: fake_capsule())).tolist()


@case
def dlpack_producer_raises():
    def boom():
        raise RuntimeError("producer failed")

    kael.from_dlpack(Producer(boom))


@case
def dlpack_producer_returns_garbage():
    kael.from_dlpack(Producer(lambda: 42))


@case
def dlpack_capsule_on_another_device():
    kael.from_dlpack(Producer(lambda: fake_capsule(device=2)))


@case
def dlpack_bogus_dtype():
    kael.from_dlpack(Producer(lambda: fake_capsule(code=99)))


@case
def dlpack_vector_lanes():
    kael.from_dlpack(Producer(lambda: fake_capsule(lanes=4)))


@case
def dlpack_negative_ndim():
    kael.from_dlpack(Producer(lambda: fake_capsule(ndim=-1)))


@case
def dlpack_huge_ndim():
    kael.from_dlpack(Producer(lambda: fake_capsule(ndim=1000)))


@case
def dlpack_null_shape():
    kael.from_dlpack(Producer(lambda: fake_capsule(shape=(2, 2), null_shape=True)))


@case
def dlpack_negative_size():
    kael.from_dlpack(Producer(lambda: fake_capsule(shape=(-3,))))


@case
def dlpack_huge_shape():
    kael.from_dlpack(Producer(lambda: fake_capsule(shape=(2 ** 62, 4))))


@case
def dlpack_null_data():
    kael.from_dlpack(Producer(lambda: fake_capsule(data=False)))


@case
def dlpack_negative_strides():
    kael.from_dlpack(Producer(lambda: fake_capsule(shape=(4,), strides=(-1,))))


@case
def dlpack_unknown_version():
    kael.from_dlpack(Producer(lambda: fake_capsule(versioned=True, major=7)))


@case
def dlpack_same_capsule_twice():
    capsule = fake_capsule()
    producer = Producer(capsule)
    first = kael.from_dlpack(producer).tolist()
    try:
        kael.from_dlpack(producer)
    except BufferError as e:
        return f"first {first}, then BufferError: {e}"
    raise AssertionError("a consumed capsule was imported again")


@case
def dlpack_device_garbage():
    for device in (("cpu", None), (1.5, 0), 7, (1, 0, 0)):
        try:
            kael.from_dlpack(Producer(lambda: fake_capsule(), device=device))
        except (TypeError, ValueError, BufferError):
            continue
        raise AssertionError(f"__dlpack_device__ {device!r} accepted")
    return "all raised"


@case
def dlpack_bare_capsule_used_twice():
    capsule = fake_capsule()
    kael.from_dlpack(capsule)
    kael.from_dlpack(capsule)


# ------------------------------------------------------------------ export keyword garbage


@case
def export_keyword_garbage():
    t = kael.arange(4.0)
    outcomes = []
    calls = [
        lambda: t.__array__(dtype=object()), lambda: t.__array__(dtype="no such dtype"),
        lambda: t.__array__(copy="yes"), lambda: t.__array__(np.float32, False),
        lambda: t.__dlpack__(stream=5), lambda: t.__dlpack__(stream="x"),
        lambda: t.__dlpack__(max_version=("a", "b")), lambda: t.__dlpack__(max_version=7),
        lambda: t.__dlpack__(dl_device="cpu"), lambda: t.__dlpack__(dl_device=(1, 0, 0)),
        lambda: t.__dlpack__(dl_device=(2, 0)), lambda: t.__dlpack__(copy="x"),
        lambda: t.__dlpack__(1, 2, 3), lambda: t.__dlpack__(unknown=1), lambda: t.__dlpack_device__(1),
        lambda: t.numpy(force="x"), lambda: t.numpy(1),
    ]
    for call in calls:
        try:
            call()
            outcomes.append("ok")
        except Exception as e:  # noqa: BLE001 - only that it is a Python exception matters
            outcomes.append(type(e).__name__)
    return outcomes


def run():
    results = {}
    for name, fn in CASES.items():
        try:
            results[name] = ("ok", fn())
        except Exception as e:  # noqa: BLE001 - reported to the parent
            results[name] = ("raised", type(e).__name__, str(e)[:300])
    return results


if __name__ == "__main__":
    print(repr(run()))
    sys.stdout.flush()
