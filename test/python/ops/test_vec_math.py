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

ROOT = Path(__file__).resolve().parents[3]
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


def float32_sweep_and_dense(hi, step):
    """float32_sweep() and every step-th float32 of magnitude in [0.25, hi), of both signs."""
    dense = np.arange(np.float32(0.25).view(np.uint32), np.float32(hi).view(np.uint32), step,
                      dtype=np.uint32).view(np.float32)
    return np.concatenate([float32_sweep(), dense, -dense])


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


# ---------------------------------------------------------------- log1p and erf, densely

def test_float32_log1p_dense_where_rounding_of_one_plus_x_matters():
    # every 7th float32 in [2^-26, 2] and in [-1, -2^-26], where 1 + x rounds and the correction
    # term carries the lost bits, plus every float32 within 2^-20 of -1 (results near -16)
    lo, hi = np.float32(2.0 ** -26).view(np.uint32), np.float32(2.0).view(np.uint32)
    pos = np.arange(lo, hi, 7, dtype=np.uint32).view(np.float32)
    neg = -np.arange(lo, np.float32(1.0).view(np.uint32), 7, dtype=np.uint32).view(np.float32)
    near = -np.arange(np.float32(1 - 2.0 ** -20).view(np.uint32), np.float32(1.0).view(np.uint32),
                      dtype=np.uint32).view(np.float32)
    x = np.concatenate([pos, neg, near])
    err = ulp_errors(kael_apply("log1p", x), float32_reference("log1p", x), np.float32)
    bound = BOUNDS[("log1p", "float32")]
    e, at = worst(err, x)
    assert e <= bound, f"log1p float32: {e:.3f} ulp at {at!r} (documented bound {bound})"


def test_float32_log1p_tiny_inputs_are_returned_exactly():
    # |x| < 2^-25: log1p(x) rounds to x; 1 + x is 1 and the whole result is the correction term
    x = np.concatenate([np.float32(2.0) ** -np.arange(25, 150, dtype=np.float32), np.float32([1e-45, 3e-39])])
    x = np.concatenate([x, -x]).astype(np.float32)
    assert np.array_equal(kael_apply("log1p", x), x)


# ---------------------------------------------------------------- float32 gelu

def documented_gelu_bounds():
    """(ulps for x >= -1, ulps for -4 sqrt(2) <= x < -1) from Note [Vectorised math]."""
    text = (ROOT / "aten/include/kael/native/vec_math.h").read_text()
    m = re.search(r"float32 gelu.*?; ([\d.]+) ulp for x >= -1 and ([\d.]+) ulp", text, re.S)
    return float(m.group(1)), float(m.group(2))


GELU_HI = 4 * math.sqrt(2)
# where the piecewise E of AVX-512 builds reaches its piece of zeros (Note [Vectorised math]): between
# -GELU_CUT and -GELU_HI such a build gives x E, a build without AVX-512 x * 0
GELU_CUT = 30.5 / 5.375


def gelu_apply(x, lib=kael):
    """gelu of a float32 NumPy array through the generated contiguous kernel (kael) or torch."""
    if lib is torch:
        return torch.nn.functional.gelu(torch.from_numpy(x.copy())).numpy()
    import kael.nn.functional as KF
    return np.array(KF.gelu(kael.frombuffer(np.ascontiguousarray(x), dtype=kael.float32)).tolist(),
                    dtype=np.float32)


def gelu_reference(x):
    xd = torch.from_numpy(x.astype(np.float64))
    return (xd * 0.5 * torch.special.erfc(-xd / math.sqrt(2))).numpy()


def test_float32_gelu_ulp_error_within_documented_bound():
    pos_bound, neg_bound = documented_gelu_bounds()
    x = float32_sweep_and_dense(6.0, 97)
    got = gelu_apply(x)
    err = ulp_errors(got, gelu_reference(x), np.float32)
    for sel, bound in ((x >= -1, pos_bound), ((x < -1) & (x >= -GELU_HI), neg_bound)):
        e, at = worst(err[sel], x[sel])
        assert e <= bound, f"gelu float32: {e:.3f} ulp at {at!r} (documented bound {bound})"
    between = (x < -GELU_HI) & (x >= -GELU_CUT)
    assert between.sum() > 100
    zero = (got == 0) & np.signbit(got)
    assert np.all(zero[between] | (err[between] <= neg_bound)), x[between][~(zero | (err <= neg_bound))[between]]
    # below: x * 0, as torch's float32 formula gives there (|exact value| < 2^-24)
    low = x < -GELU_CUT
    assert np.all(got[low] == 0) and np.all(np.signbit(got[low]))
    assert np.abs(gelu_reference(x[low])).max() < 2.0 ** -24


def test_float32_gelu_is_more_accurate_than_the_erf_formula_for_negative_inputs():
    # torch's float32 result x (1 + erf(x / sqrt(2))) / 2 cancels as x falls; kael's does not
    x = -np.linspace(1.5, 5.5, 4001, dtype=np.float32)
    ref = gelu_reference(x)
    err_kael = np.abs(gelu_apply(x) - ref) / np.abs(ref)
    err_torch = np.abs(gelu_apply(x, torch) - ref) / np.abs(ref)
    assert err_kael.max() < 1e-5 < err_torch.max()


def test_float32_gelu_special_values():
    x = np.array([0.0, -0.0, math.inf, -math.inf, math.nan, 1e-45, -1e-45, 1e-30, -1e-30, 6.0, -6.0, 10.0,
                  -10.0, 3e38, -3e38, GELU_HI, -GELU_HI], dtype=np.float32)
    got, want = gelu_apply(x), gelu_apply(x, torch)
    # NaN for NaN and -inf only (torch's vectorised loop also gives NaN at +inf, its scalar loop
    # inf, and inf at 3e38, where x (1 + erf) overflows before the halving)
    assert np.array_equal(np.isnan(got), np.isnan(x) | (x == -math.inf)), (x, got)
    assert got[13] == x[13] and got[14] == 0
    assert np.array_equal(got[x == 0], x[x == 0]) and np.array_equal(np.signbit(got[x == 0]), np.signbit(x[x == 0]))
    # +inf (torch's scalar loop; docs/decisions/vectorised-math.md), -inf: NaN
    assert got[2] == math.inf and math.isnan(got[3])
    assert np.array_equal(got[[9, 11, 13]], x[[9, 11, 13]])  # x where Phi(x) rounds to 1
    assert np.all(got[[10, 12, 14]] == 0) and np.all(np.signbit(got[[10, 12, 14]]))  # -0.0, as torch
    np.testing.assert_allclose(got[5:9], want[5:9], rtol=0, atol=1e-44)


def gelu_tanh_apply(x, lib=kael):
    F = lib.nn.functional
    if lib is torch:
        return F.gelu(torch.from_numpy(x.copy()), approximate="tanh").numpy()
    return np.array(F.gelu(kael.frombuffer(np.ascontiguousarray(x), dtype=kael.float32), approximate="tanh").tolist(),
                    dtype=np.float32)


def gelu_tanh_reference(x):
    """(x / (1 + exp(-2 y)), -2 y) in long double, y = sqrt(2 / pi) (x + 0.044715 x^3): PyTorch's
    0.5 x (1 + tanh(y)) written without its cancellation."""
    xl = x.astype(np.longdouble)
    n = -2 * np.sqrt(np.longdouble(2) / np.longdouble(np.pi)) * (xl + np.longdouble("0.044715") * xl ** 3)
    with np.errstate(all="ignore"):
        return xl / (1 + np.exp(n)), n


def documented_gelu_tanh_bound():
    text = (ROOT / "aten/include/kael/native/vec_math.h").read_text()
    m = re.search(r"at most ([\d.]+) \+ ([\d.]+) \|2 y\| ulp", text)
    return float(m.group(1)), float(m.group(2))


def test_float32_gelu_tanh_ulp_error_within_documented_bound():
    base, per = documented_gelu_tanh_bound()
    x = float32_sweep_and_dense(12.0, 37)
    x = x[np.isfinite(x)]
    got = gelu_tanh_apply(x)
    ref, n = gelu_tanh_reference(x)
    # where exp(-2 y) overflows float (x < -10.06) the result is -0.0, the exact value below 3e-38
    flushed = n > np.log(np.longdouble(np.finfo(np.float32).max))
    assert flushed.sum() > 1000 and np.abs(ref[flushed]).max() < 3e-38
    assert np.all(got[flushed] == 0) and np.all(np.signbit(got[flushed]))
    err = ulp_errors(got[~flushed], ref[~flushed], np.float32)
    bound = base + per * np.abs(n[~flushed].astype(np.float64))
    i = int(np.argmax(err - bound))
    assert err[i] <= bound[i], f"gelu tanh float32: {float(err[i]):.3f} ulp at {x[~flushed][i]!r} (bound {bound[i]:.2f})"


def test_float32_gelu_tanh_is_more_accurate_than_torchs_formula_for_negative_inputs():
    # torch's 0.5 x (1 + tanh(y)) cancels as x falls (-0.0 from x = -5.06); kael's does not
    x = -np.linspace(2.0, 9.5, 4001, dtype=np.float32)
    ref = gelu_tanh_reference(x)[0].astype(np.float64)
    err_kael = np.abs(gelu_tanh_apply(x) - ref) / np.abs(ref)
    err_torch = np.abs(gelu_tanh_apply(x, torch) - ref) / np.abs(ref)
    assert err_kael.max() < 2e-5 and err_torch.max() == 1.0  # torch's -0.0: all digits lost


def test_float32_gelu_tanh_special_values():
    x = np.array([0.0, -0.0, math.inf, -math.inf, math.nan, 1e-45, -1e-45, 1e-30, -1e-30, 1e13, -1e13, 3e38, -3e38,
                  20.0, -20.0], dtype=np.float32)
    got, want = gelu_tanh_apply(x), gelu_tanh_apply(x, torch)
    assert np.array_equal(np.isnan(got), np.isnan(want)), (got, want)  # NaN at NaN and -inf, as torch
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok], want[ok]) and np.array_equal(np.signbit(got[ok]), np.signbit(want[ok])), (got, want)


@pytest.mark.parametrize("name", ["log1p", "erf", "gelu", "gelu_tanh"])
def test_one_and_two_threads_give_identical_bits(name):
    fn = simd_op(name) if name.startswith("gelu") else getattr(kael, name)
    x = torch.randn(1 << 20, dtype=torch.float32) * 4
    if name == "log1p":
        x = x.abs() - 0.999
    before = kael.get_num_threads()
    try:
        kael.set_num_threads(1)
        one = np.array(fn(to_kael_tensor(x)).tolist(), dtype=np.float32)
        kael.set_num_threads(2)
        two = np.array(fn(to_kael_tensor(x)).tolist(), dtype=np.float32)
    finally:
        kael.set_num_threads(before)
    assert np.array_equal(one.view(np.uint32), two.view(np.uint32))


def to_kael_tensor(t):
    from helpers import to_kael
    return to_kael(t)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_gelu_strided_and_every_float_dtype_match_torch(dtype):
    from helpers import check, to_kael
    import kael.nn.functional as KF
    t = torch.linspace(-12, 12, 3001, dtype=torch.float64).to(dtype)
    rows = t[:3000].reshape(3, 1000)
    check(KF.gelu(to_kael(rows).t()), torch.nn.functional.gelu(rows.t()))
    check(KF.gelu(to_kael(t[:1000]).expand(4, 1000)), torch.nn.functional.gelu(t[:1000].expand(4, 1000)))
    check(KF.gelu(to_kael(t)[::3]), torch.nn.functional.gelu(t[::3]))


# ---------------------------------------------------------------- ops with a SIMD form
# exp, log1p, gelu (both forms), sigmoid and silu run a SIMD form of their formula where the build targets AVX-512 (Note [SIMD
# forms]): contiguous float32 straight from memory, partial vectors masked, strided operands and
# float16/bfloat16 through a buffer. Every layout must give the bits of the contiguous float32
# result, element by element (the C++ test SimdForms checks the two forms on every float32).

def simd_op(name, lib=kael):
    F = lib.nn.functional
    if name == "gelu_tanh":
        return lambda x: F.gelu(x, approximate="tanh")
    return getattr(F, name) if name in ("gelu", "silu") else getattr(lib, name)


def bits_of(t):
    return np.array(t.tolist(), dtype=np.float32).view(np.uint32)


SIMD_SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e-45, -1e-45, 88.7, 89.5, -103.9, -104.5, 5.6,
                -5.66, 5.66, -6.0, 1e30, -1e30, 3e38, -3e38, -1.0, -2.0, -0.99999994, 1e-8, -1e-8]


SIMD_OPS = ["exp", "log1p", "gelu", "gelu_tanh", "sigmoid", "silu"]


@pytest.mark.parametrize("name", SIMD_OPS)
def test_simd_ops_give_the_same_bits_in_every_layout(name):
    fn = simd_op(name)
    g = torch.Generator().manual_seed(7)
    x = torch.cat([torch.tensor(SIMD_SPECIAL), torch.randn(2000, generator=g) * 6]).float()
    kx = kael.tensor(x.tolist(), dtype=kael.float32)
    want = bits_of(fn(kx))
    # every length of a partial vector, and starts off a vector's alignment
    for start in (0, 1, 5):
        for n in list(range(0, 35)) + [255, 256, 257, 1000]:
            got = bits_of(fn(kx[start:start + n]))
            assert np.array_equal(got, want[start:start + n]), (name, start, n)
    # strided: every other element, a transposed matrix, a broadcast input
    assert np.array_equal(bits_of(fn(kx[::2])), want[::2])
    m = kx[:2000].reshape(40, 50)
    assert np.array_equal(np.array(fn(m.t()).t().tolist(), dtype=np.float32).view(np.uint32).ravel(), want[:2000])
    e = kx[3:4].expand(37)
    assert np.array_equal(bits_of(fn(e)), np.repeat(want[3:4], 37))
    # out= and in-place (gelu and silu have no out= in kael.nn.functional; exp and sigmoid do)
    if name in ("exp", "sigmoid"):
        out = kael.empty(kx.shape, dtype=kael.float32)
        getattr(kael, name)(kx, out=out)
        assert np.array_equal(bits_of(out), want)
        y = kx.clone()
        getattr(y, name + "_")()
        assert np.array_equal(bits_of(y), want)


@pytest.mark.parametrize("name", SIMD_OPS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_simd_ops_round_the_float32_result_once_for_half_types(name, dtype):
    # float16 and bfloat16 compute in float32 and round once when stored (Note [Half types]):
    # the result is the float32 result of the same (rounded) input, rounded to the type
    fn = simd_op(name)
    kd = getattr(kael, dtype)
    g = torch.Generator().manual_seed(8)
    x = torch.cat([torch.tensor(SIMD_SPECIAL), torch.randn(3001, generator=g) * 6]).to(getattr(torch, dtype))
    kx = kael.tensor(x.float().tolist(), dtype=kael.float32).to(kd)
    want = fn(kx.float()).to(kd)
    for got, ref in ((fn(kx), want), (fn(kx[::3]), want[::3]), (fn(kx[5:22]), want[5:22])):
        a, b = bits_of(got.float()), bits_of(ref.float())
        nan_a, nan_b = np.isnan(a.view(np.float32)), np.isnan(b.view(np.float32))
        assert np.array_equal(nan_a, nan_b) and np.array_equal(a[~nan_a], b[~nan_b]), (name, dtype)
    # and against torch on the random inputs (the special values are checked above and in
    # test_float32_gelu_special_values: torch's vectorised gelu gives NaN at +inf)
    k = len(SIMD_SPECIAL)
    ref = simd_op(name, torch)(x[k:])
    got = torch.tensor(fn(kx[k:]).float().tolist()).to(x.dtype)
    torch.testing.assert_close(got, ref, equal_nan=True)  # (log1p of x < -1)
