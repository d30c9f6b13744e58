"""addmm and baddbmm of integer tensors with float (or out-of-range) beta and alpha: as PyTorch,
the numbers are converted to the integer dtype first (a float truncated toward zero, a value the
dtype cannot hold a RuntimeError), and the result keeps the integer dtype."""
import math

import pytest
import torch

import kael
from helpers import INT_NAMES, check, rand_torch, to_kael

SCALARS = [dict(beta=0.5), dict(alpha=0.5), dict(beta=1.7, alpha=-1.5), dict(beta=-1), dict(alpha=2.0),
           dict(beta=0.0, alpha=3.9), dict(beta=True, alpha=False), dict(beta=300), dict(alpha=300.5),
           dict(beta=127.5), dict(beta=-128.0), dict(beta=math.nan), dict(alpha=math.inf), dict(alpha=1e30),
           dict(beta=2**40), dict(alpha=-255), dict(alpha=-256)]


def calls():
    yield "addmm", lambda lib, s, a, b, kw: lib.addmm(s, a, b, **kw), ((3, 5), (3, 4), (4, 5))
    yield "addmm", lambda lib, s, a, b, kw: s.addmm(a, b, **kw), ((5,), (3, 4), (4, 5))
    yield "baddbmm", lambda lib, s, a, b, kw: lib.baddbmm(s, a, b, **kw), ((2, 3, 5), (2, 3, 4), (2, 4, 5))
    yield "baddbmm", lambda lib, s, a, b, kw: s.baddbmm(a, b, **kw), ((1, 3, 1), (2, 3, 4), (2, 4, 5))


CALLS = list(calls())


@pytest.mark.parametrize("dtype", INT_NAMES)
@pytest.mark.parametrize("kw", SCALARS, ids=str)
@pytest.mark.parametrize("i", range(len(CALLS)))
def test_integer_addmm_with_float_scalars(dtype, kw, i):
    name, fn, shapes = CALLS[i]
    s, a, b = (rand_torch(shape, dtype) for shape in shapes)
    try:
        expect = fn(torch, s, a, b, kw)
    except RuntimeError as e:
        assert "without overflow" in str(e)
        with pytest.raises(RuntimeError, match="without overflow") as ke:
            fn(kael, to_kael(s), to_kael(a), to_kael(b), kw)
        assert f"{name}: value " in str(ke.value)
        return
    check(fn(kael, to_kael(s), to_kael(a), to_kael(b), kw), expect)


def test_float_scalars_still_compute_in_floating_dtypes():
    s, a, b = rand_torch((3, 5), "float64"), rand_torch((3, 4), "float64"), rand_torch((4, 5), "float64")
    check(kael.addmm(to_kael(s), to_kael(a), to_kael(b), beta=0.5, alpha=-1.5), torch.addmm(s, a, b, beta=0.5, alpha=-1.5))
    check(kael.addmm(to_kael(s), to_kael(a), to_kael(b), beta=1e30), torch.addmm(s, a, b, beta=1e30))
