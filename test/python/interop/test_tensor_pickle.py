"""pickle and copy.deepcopy keep what torch keeps: values, dtype, shape, requires_grad, the Python
subclass, the instance __dict__ and __slots__ (deepcopy: .grad too, and non-leaves refused)."""
import copy
import pickle

import pytest
import torch

import kael
import kael.nn


# Subclasses at module level, so that pickle finds them by name.
class KaelTagged(kael.Tensor):
    pass


class TorchTagged(torch.Tensor):
    pass


class KaelSlotted(kael.Tensor):
    __slots__ = ("extra",)


class TorchSlotted(torch.Tensor):
    __slots__ = ("extra",)


def sub_of(lib, name="Tagged"):
    return globals()[("Kael" if lib is kael else "Torch") + name]


def make(lib, cls, data):
    return torch.Tensor._make_subclass(cls, data) if lib is torch else cls(data)


def observed(t):
    return (type(t).__name__.replace("Kael", "").replace("Torch", ""), str(t.dtype).split(".")[-1], tuple(t.shape), t.tolist(),
            t.requires_grad, t.is_leaf, dict(getattr(t, "__dict__", {})))


ROUND_TRIPS = {
    "pickle": lambda t: pickle.loads(pickle.dumps(t)),
    "pickle protocol 2": lambda t: pickle.loads(pickle.dumps(t, protocol=2)),
    "deepcopy": copy.deepcopy,
}


@pytest.mark.parametrize("how", sorted(ROUND_TRIPS))
@pytest.mark.parametrize("requires_grad", [False, True])
def test_requires_grad_survives(how, requires_grad):
    out = []
    for lib in (kael, torch):
        t = lib.arange(6.0).reshape(2, 3).requires_grad_(requires_grad)
        out.append(observed(ROUND_TRIPS[how](t)))
    assert out[0] == out[1] and out[0][4] is requires_grad


def tagged(lib):
    t = make(lib, sub_of(lib), lib.ones(3)).requires_grad_()
    t.note = {"k": [1, 2]}
    return t


def without_leafness(obs):
    # torch rebuilds a pickled subclass through as_subclass, an autograd alias: a non-leaf that
    # requires grad; kael's is a leaf (a deliberate difference, the only one here)
    return obs[:5] + obs[6:]


@pytest.mark.parametrize("how", ["pickle", "pickle protocol 2"])
def test_subclass_dict_and_requires_grad_survive_pickle(how):
    out = []
    for lib in (kael, torch):
        t = tagged(lib)
        back = ROUND_TRIPS[how](t)
        out.append((without_leafness(observed(back)), back.note is t.note))
    assert out[0] == out[1] and out[0][1] is False


def test_subclass_dict_and_requires_grad_survive_deepcopy():
    # torch's deepcopy refuses a subclass whose new_empty() returns a plain tensor (this one);
    # kael's copies it as pickle does in both libraries, and the copy is a leaf
    with pytest.raises(RuntimeError, match="new_empty"):
        copy.deepcopy(tagged(torch))
    t = tagged(kael)
    back = copy.deepcopy(t)
    want = without_leafness(observed(pickle.loads(pickle.dumps(tagged(torch)))))
    assert without_leafness(observed(back)) == want and back.is_leaf
    assert back.note == t.note and back.note is not t.note


def test_pickled_non_leaf_comes_back_as_a_leaf_that_requires_grad():
    out = []
    for lib in (kael, torch):
        x = lib.ones(2, requires_grad=True)
        y = x * 2
        out.append(observed(pickle.loads(pickle.dumps(y))))
    assert out[0] == out[1] and out[0][4:6] == (True, True)


def test_deepcopy_of_a_non_leaf_is_refused_as_in_torch():
    for lib in (kael, torch):
        y = lib.ones(2, requires_grad=True) * 2
        with pytest.raises(RuntimeError, match="graph leaves"):
            copy.deepcopy(y)


def test_deepcopy_copies_grad_sharing_the_memo():
    out = []
    for lib in (kael, torch):
        x = lib.ones(2, requires_grad=True)
        (x * 3).sum().backward()
        a, b, g = copy.deepcopy([x, x, x.grad])
        out.append((a is b, a.grad.tolist(), a.grad is g, a.grad is not x.grad, a.requires_grad))
    assert out[0] == out[1] == (True, [3.0, 3.0], True, True, True)


def test_slots_survive():
    out = []
    for lib in (kael, torch):
        cls = sub_of(lib, "Slotted")
        t = make(lib, cls, lib.zeros(2))
        t.extra = ("slot", 1)
        out.append([(type(b).__name__.replace("Kael", "").replace("Torch", ""), b.extra)
                    for b in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t) if lib is kael else None) if b is not None])
    # (torch's deepcopy refuses this subclass, see above; kael's keeps the slot as pickle does)
    assert out[0][0] == out[1][0] and out[0][1] == out[0][0]


@pytest.mark.parametrize("requires_grad", [True, False])
def test_parameters_round_trip(requires_grad):
    out = []
    for lib in (kael, torch):
        p = lib.nn.Parameter(lib.ones(2), requires_grad=requires_grad)
        p.tag = "w"
        for back in (pickle.loads(pickle.dumps(p)), copy.deepcopy(p)):
            out.append((type(back).__name__, back.requires_grad, getattr(back, "tag", None), back.tolist()))
    # torch's Parameter.__deepcopy__ makes a new Parameter of the data and requires_grad only
    assert out[:2] == out[2:] and out[0][2] == "w" and out[1][2] is None
