"""kael's vectorised exp, expm1, log, log1p, tanh, sigmoid and erf (kael/native/vec_math.h):
the largest error in ulps over a sweep of float32 and float64 inputs stays within the bound
documented in the header's Note [Vectorised math], and special values match PyTorch.

The sweeps run the generated kernels themselves (contiguous out= calls through kael's Python
API, kael.frombuffer sharing NumPy's memory). References: float64 NumPy (float32 inputs),
long double NumPy or mpmath (float64 inputs).
"""
import math
import re
from pathlib import Path

import mpmath
import numpy as np
import pytest
import torch

import kael

ROOT = Path(__file__).resolve().parents[2]
FUNCS = ["exp", "expm1", "log", "log1p", "tanh", "sigmoid", "erf"]


def documented_bounds():
    """{(function, dtype): ulps} from the table in Note [Vectorised math]."""
    text = (ROOT / "aten/include/kael/native/vec_math.h").read_text()
    bounds = {}
    for m in re.finditer(r"^//\s+(\w+)\s+([\d.]+) ulp\s+([\d.]+) ulp", text, re.M):
        bounds[(m.group(1), "float32")] = float(m.group(2))
        bounds[(m.group(1), "float64")] = float(m.group(3))
    return bounds


BOUNDS = documented_bounds()


def test_every_function_has_a_documented_bound():
    assert sorted({f for f, _ in BOUNDS}) == sorted(FUNCS)


def kael_apply(name, x):
    """kael.<name>(x) computed into a NumPy array through the generated contiguous kernel."""
    x = np.ascontiguousarray(x)
    out = np.empty_like(x)
    dtype = kael.float32 if x.dtype == np.float32 else kael.float64
    kx = kael.frombuffer(x, dtype=dtype)
    kout = kael.frombuffer(out, dtype=dtype)
    getattr(kael, name)(kx, out=kout)
    return out


def torch_apply(name, x):
    return getattr(torch, name)(torch.from_numpy(np.ascontiguousarray(x).copy())).numpy()


def ulp_errors(got, ref, dtype):
    """|got - ref| in ulps of the correctly rounded result (spacing of the dtype at |ref|, the
    smallest subnormal spacing at the bottom). Where ref rounds to +-inf, got must equal it."""
    info = np.finfo(dtype)
    ref = np.asarray(ref)
    with np.errstate(all="ignore"):
        rounded = ref.astype(dtype)
        mag = np.abs(ref.astype(np.longdouble))
        finite = np.isfinite(mag) & (mag > 0)
        exponent = np.floor(np.log2(np.where(finite, mag, 1))).astype(np.int64)
        ulp = np.ldexp(np.longdouble(1), np.maximum(exponent - info.nmant, info.minexp - info.nmant))
        err = np.abs(got.astype(np.longdouble) - ref.astype(np.longdouble)) / ulp
    overflow = np.isinf(rounded)
    err[overflow] = np.where(got[overflow] == rounded[overflow], 0, np.inf)
    return err


def float32_sweep():
    """Every 251st float32 bit pattern (17M values: every exponent, both signs, subnormals),
    without NaNs, plus the boundaries where results overflow, underflow or saturate."""
    bits = np.arange(0, 2**32, 251, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[~np.isnan(x)]
    edges = np.array([0.0, -0.0, 1e-45, -1e-45, 1.1754942e-38, 1.1754944e-38, -1.1754944e-38,
                      88.72283, 88.72284, 88.7229, 89.0, -87.33654, -87.3366, -103.27893, -103.97208,
                      -103.9721, -104.0, 9.0, 9.01, 3.9, 3.92, 4.0, -1.0, -0.99999994, 1.0, 0.5,
                      np.finfo(np.float32).max, -np.finfo(np.float32).max], dtype=np.float32)
    return np.concatenate([x, edges])


def float64_sweep(rng, lo, hi, n=1 << 18):
    """Random float64 bit patterns (every exponent) and uniform values in [lo, hi]."""
    bits = rng.integers(0, 2**63, size=n, dtype=np.int64).astype(np.uint64)
    bits[: n // 2] |= np.uint64(1 << 63)
    x = bits.view(np.float64)
    x = x[np.isfinite(x)]
    u = rng.uniform(lo, hi, size=n)
    edges = np.array([0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 709.78, 709.7827128933840,
                      709.79, 710.0, -708.4, -745.13, -745.14, -746.0, 19.06, 19.1, 5.9, 5.92, 6.0, -1.0,
                      np.nextafter(-1.0, 0.0), 1.0, 0.5, np.finfo(np.float64).max, -np.finfo(np.float64).max])
    return np.concatenate([x, u, edges])


def float64_reference(name, x):
    """long double (64-bit mantissa) NumPy; erf through mpmath on a sample."""
    xl = x.astype(np.longdouble)
    with np.errstate(all="ignore"):
        if name == "sigmoid":
            return 1 / (1 + np.exp(-xl))
        if name == "erf":
            mpmath.mp.prec = 80
            return np.array([np.longdouble(str(mpmath.erf(mpmath.mpf(float(v))))) for v in x],
                            dtype=np.longdouble)
        return getattr(np, name)(xl)


def float32_reference(name, x):
    xd = x.astype(np.float64)
    with np.errstate(all="ignore"):
        if name == "sigmoid":
            return 1 / (1 + np.exp(-xd))
        if name == "erf":
            return torch.special.erf(torch.from_numpy(xd)).numpy()  # float64 erf: exact to float32
        return getattr(np, name)(xd)


def in_domain(name, x):
    """Inputs where the function has a finite or infinite real value (not NaN)."""
    if name == "log":
        return x >= 0
    if name == "log1p":
        return x >= -1
    return np.ones(x.shape, bool)


def worst(err, x):
    i = int(np.argmax(err))
    return float(err[i]), float(x[i])


@pytest.mark.parametrize("name", FUNCS)
def test_float32_ulp_error_within_documented_bound(name):
    x = float32_sweep()
    x = x[in_domain(name, x)]
    got = kael_apply(name, x)
    ref = float32_reference(name, x)
    err = ulp_errors(got, ref, np.float32)
    if name == "sigmoid":
        # PyTorch's formula 1 / (1 + exp(-x)): exp(-x) overflows below -88.7228 (-log of the
        # largest float32), the result is 0 there (as in PyTorch) instead of a value below the
        # smallest normal float32.
        low = x < np.float32(-88.72284)
        assert np.all(got[low] == 0)
        err = err[~low]
        x = x[~low]
    bound = BOUNDS[(name, "float32")]
    e, at = worst(err, x)
    assert e <= bound, f"{name} float32: {e:.3f} ulp at {at!r} (documented bound {bound})"


def test_float32_erf_dense_where_branches_meet():
    # every 5th float32 in [0.5, 4.5] and its negation: erf's polynomial and exp branches meet at
    # 1, and exp_moderate's reduction with one constant for ln2 errs most at the top of its range
    lo, hi = np.float32(0.5).view(np.uint32), np.float32(4.5).view(np.uint32)
    x = np.arange(lo, hi, 5, dtype=np.uint32).view(np.float32)
    x = np.concatenate([x, -x])
    err = ulp_errors(kael_apply("erf", x), float32_reference("erf", x), np.float32)
    bound = BOUNDS[("erf", "float32")]
    e, at = worst(err, x)
    assert e <= bound, f"erf float32: {e:.3f} ulp at {at!r} (documented bound {bound})"


@pytest.mark.parametrize("name", FUNCS)
def test_float64_ulp_error_within_documented_bound(name):
    rng = np.random.default_rng(sum(map(ord, name)))
    ranges = {"exp": (-750, 750), "expm1": (-3, 3), "log": (0, 4), "log1p": (-1, 2), "tanh": (-3, 3),
              "sigmoid": (-40, 40), "erf": (-7, 7)}
    x = float64_sweep(rng, *ranges[name], n=1 << 13 if name == "erf" else 1 << 18)
    x = x[in_domain(name, x)]
    got = kael_apply(name, x)
    ref = float64_reference(name, x)
    err = ulp_errors(got, ref, np.float64)
    if name == "sigmoid":
        low = x < -709.7828
        assert np.all(got[low] == 0)
        err, x = err[~low], x[~low]
    bound = BOUNDS[(name, "float64")]
    e, at = worst(err, x)
    assert e <= bound, f"{name} float64: {e:.3f} ulp at {at!r} (documented bound {bound})"


SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, -1.0, 1.0, -2.0, 1e-45, -1e-45, 5e-324, -5e-324,
            1e-30, -1e-30, 88.8, -88.8, 100.0, -100.0, 710.0, -710.0, 746.0, -746.0, 1e300, -1e300]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", FUNCS)
def test_special_values_match_torch(name, dtype):
    with np.errstate(over="ignore"):
        x = np.array(SPECIALS, dtype=dtype)  # 1e300 is inf in float32
    got = kael_apply(name, x)
    want = torch_apply(name, x)
    if name == "log1p":
        # torch's log1p flushes subnormal inputs to 0; kael returns x, the correctly rounded
        # value (as C's log1p does)
        sub = (x != 0) & (np.abs(x) < np.finfo(dtype).tiny)
        assert np.array_equal(got[sub], x[sub]) and np.all(want[sub] == 0)
        want[sub] = x[sub]
    assert np.array_equal(np.isnan(got), np.isnan(want)), (x, got, want)
    finite = ~np.isnan(want)
    # infinities, zeros (with their sign) and saturated values exactly; the rest to 2 ulp
    exact = np.isinf(want) | (want == 0) | (np.abs(want) == 1)
    assert np.array_equal(got[finite & exact], want[finite & exact]), (x, got, want)
    assert np.array_equal(np.signbit(got[finite & exact]), np.signbit(want[finite & exact])), (x, got, want)
    np.testing.assert_allclose(got[finite & ~exact], want[finite & ~exact], rtol=4 * np.finfo(dtype).eps, atol=0)


@pytest.mark.parametrize("name", FUNCS)
def test_strided_and_half_inputs_use_the_same_functions(name):
    """Non-contiguous, broadcast and float16/bfloat16 inputs give torch's values within the
    shared tolerances (the strided loops call the same scalar code)."""
    from helpers import check, to_kael
    t = torch.linspace(-12, 12, 3001, dtype=torch.float64)
    if name in ("log", "log1p"):
        t = t.abs() + (0.5 if name == "log" else -0.5)
    for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        rows = t.to(dt)[:3000].reshape(3, 1000)
        check(getattr(kael, name)(to_kael(rows).t()), getattr(torch, name)(rows.t()))
        row = t.to(dt)[:1000]
        check(getattr(kael, name)(to_kael(row).expand(4, 1000)), getattr(torch, name)(row.expand(4, 1000)))
