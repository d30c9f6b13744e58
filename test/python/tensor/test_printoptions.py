"""kael.set_printoptions against torch.set_printoptions: the repr of the same values under the
same options is the same text (Note [Print options] in kael/core/tensor.h)."""
import math
import re

import numpy as np
import pytest
import torch
import torch._tensor_str

import kael
import kael._tensor_str


@pytest.fixture(autouse=True)
def restore():
    yield
    kael.set_printoptions(profile="default")
    torch.set_printoptions(profile="default")


def expected_repr(t):
    """torch's repr of t with kael's names: torch's own functions place the suffixes, from the
    lengths of kael's names ("dtype=kael.float64" is a character shorter than torch's, which
    moves a suffix at the line's end)."""
    body = "tensor(" + torch._tensor_str._tensor_str(t, 7)
    text = repr(t)
    assert text.startswith(body) and text.endswith(")")
    rest = text[len(body):-1]
    suffixes = re.findall(r"size=\([^)]*\)|dtype=[\w.]+|requires_grad=True|grad_fn=<\w+>", rest)
    assert re.sub(r"[,\s]", "", rest) == re.sub(r"[,\s]", "", "".join(suffixes))  # nothing else after the values
    suffixes = [x.replace("torch.", "kael.") for x in suffixes]
    return torch._tensor_str._add_suffixes(body, suffixes, 7, False)


def same_repr(make):
    k, t = make(kael), make(torch)
    assert repr(k) == expected_repr(t)
    assert repr(k).replace("kael.", "torch.").split() == repr(t).split()  # the same words
    assert str(k) == repr(k)


RNG = np.random.default_rng(5)
VALUES = {
    "small floats": RNG.standard_normal((3, 4)),
    "wide range": np.array([1e-6, 1.0, 3e5, -2.5]),
    "integral floats": np.array([[1.0, -20.0, 300.0], [4.0, 5.0, 6.0]]),
    "big": np.array([1.5e9, 2.0, 3.25]),
    "nonfinite": np.array([math.nan, math.inf, -math.inf, 0.5, -0.0]),
    "zeros": np.zeros(3),
    "long row": RNG.standard_normal(40),
    "many": RNG.standard_normal((30, 40)),
    "3-d": RNG.standard_normal((4, 5, 6)),
    "scalar": np.array(3.14159265),
}

OPTIONS = [
    {},
    {"precision": 2},
    {"precision": 0},
    {"precision": 10},
    {"sci_mode": True},
    {"sci_mode": False},
    {"sci_mode": True, "precision": 1},
    {"threshold": 5},
    {"threshold": 5, "edgeitems": 1},
    {"threshold": 5, "edgeitems": 0},
    {"threshold": 0},
    {"threshold": math.inf},
    {"linewidth": 30},
    {"linewidth": 5},
    {"linewidth": 200},
    {"profile": "short"},
    {"profile": "full"},
    {"profile": "short", "precision": 6},
]


@pytest.mark.parametrize("options", OPTIONS, ids=[repr(o) for o in OPTIONS])
@pytest.mark.parametrize("name", list(VALUES))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_reprs_match_torch(options, name, dtype):
    kael.set_printoptions(**options)
    torch.set_printoptions(**options)
    v = VALUES[name]
    same_repr(lambda m: m.tensor(v.tolist(), dtype=getattr(m, dtype)))


@pytest.mark.parametrize("options", OPTIONS, ids=[repr(o) for o in OPTIONS])
def test_other_dtypes_and_suffixes_match_torch(options):
    kael.set_printoptions(**options)
    torch.set_printoptions(**options)
    same_repr(lambda m: m.arange(-50, 50).reshape(10, 10))
    same_repr(lambda m: m.tensor([True, False] * 20))
    same_repr(lambda m: m.tensor([1.5, -2.25, 1e-3], dtype=m.float16))
    same_repr(lambda m: m.linspace(-1, 1, 25, dtype=m.float64))
    same_repr(lambda m: m.linspace(0, 1, 7).requires_grad_())
    same_repr(lambda m: m.linspace(0, 1, 7).requires_grad_() * 2)
    same_repr(lambda m: m.zeros(0, 3))


def test_the_options_stay_until_changed_and_a_call_resets_sci_mode():
    kael.set_printoptions(precision=2, sci_mode=True)
    torch.set_printoptions(precision=2, sci_mode=True)
    same_repr(lambda m: m.tensor([1.23456, 2.0]))
    # a later call without sci_mode sets it back to automatic (torch's rule); precision stays
    kael.set_printoptions(linewidth=60)
    torch.set_printoptions(linewidth=60)
    same_repr(lambda m: m.tensor([1.23456, 2.0]))
    assert kael._tensor_str.get_printoptions() == torch._tensor_str.get_printoptions()
    kael.set_printoptions(profile="default")
    torch.set_printoptions(profile="default")
    assert kael._tensor_str.get_printoptions() == torch._tensor_str.get_printoptions()


def test_printoptions_context_restores():
    with kael._tensor_str.printoptions(precision=1, threshold=3):
        assert repr(kael.tensor([1.25, 2.5, 3.75, 5.0])) == "tensor([1.2, 2.5, 3.8, 5.0])"
    assert repr(kael.tensor([1.25, 2.5])) == "tensor([1.2500, 2.5000])"
    assert kael._tensor_str.get_printoptions() == {"precision": 4, "threshold": 1000, "edgeitems": 3,
                                                   "linewidth": 80, "sci_mode": None}


@pytest.mark.parametrize("kwargs,exc", [
    ({"precision": -1}, ValueError),
    ({"precision": 2.5}, TypeError),
    ({"edgeitems": -2}, ValueError),
    ({"edgeitems": "3"}, TypeError),
    ({"linewidth": None, "threshold": "10"}, TypeError),
    ({"threshold": math.nan}, TypeError),
    ({"sci_mode": 1}, TypeError),
    ({"profile": "long"}, ValueError),
])
def test_bad_options_raise_and_change_nothing(kwargs, exc):
    kael.set_printoptions(precision=3)
    with pytest.raises(exc, match="set_printoptions"):
        kael.set_printoptions(**kwargs)
    assert kael._tensor_str.get_printoptions()["precision"] == 3
    assert repr(kael.tensor([0.5])) == "tensor([0.500])"


def test_huge_precision_is_not_truncated():
    kael.set_printoptions(precision=60)
    torch.set_printoptions(precision=60)
    same_repr(lambda m: m.tensor([0.1, 1 / 3], dtype=m.float64))
