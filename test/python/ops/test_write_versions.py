"""In-place and out= writes bump the destination's version once, as torch's do, also when the
result is computed in another dtype and copied in afterwards (the pointwise set-up writes such a
result with copy_ through the dispatcher, and copy_ is then the one write that bumps it)."""
import contextlib

import pytest
import torch

import kael

CASES = {
    "add_ float32 += float64": (lambda lib: lib.zeros(3), lambda lib, t: t.add_(lib.ones(3, dtype=lib.float64))),
    "add_ float16 += float32": (lambda lib: lib.zeros(3, dtype=lib.float16), lambda lib, t: t.add_(lib.ones(3))),
    "mul_ int64 *= 0-d int64": (lambda lib: lib.ones(3, dtype=lib.int64), lambda lib, t: t.mul_(lib.tensor(2))),
    "copy_ float32 <- int64": (lambda lib: lib.zeros(3), lambda lib, t: t.copy_(lib.ones(3, dtype=lib.int64))),
    "sub_ float32 -= number": (lambda lib: lib.zeros(3), lambda lib, t: t.sub_(2.5)),
    "div_ float64 /= int64": (lambda lib: lib.ones(3, dtype=lib.float64), lambda lib, t: t.div_(lib.ones(3, dtype=lib.int64))),
}


def _bumps(lib, make, write):
    t = make(lib)
    before = t._version
    write(lib, t)
    return t._version - before, t.tolist()


@pytest.mark.parametrize("name", sorted(CASES))
def test_in_place_writes_bump_the_version_once(name):
    make, write = CASES[name]
    assert _bumps(kael, make, write) == _bumps(torch, make, write)
    assert _bumps(kael, make, write)[0] == 1


@pytest.mark.parametrize("out_shape", [(3,), (2,)], ids=["same shape", "resized"])
def test_an_out_of_another_dtype_is_bumped_once(out_shape):
    results = []
    for lib in (kael, torch):
        out = lib.zeros(*out_shape, dtype=lib.float64)
        before = out._version
        with pytest.warns(UserWarning) if out_shape == (2,) else contextlib.nullcontext():
            lib.add(lib.ones(3), lib.ones(3), out=out)
        results.append((out._version - before, out.tolist(), out.dtype.itemsize))
    assert results[0] == results[1]
    assert results[0][0] == 1
