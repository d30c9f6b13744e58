#!/usr/bin/env python3
"""Fits the polynomials of kael's vectorised math (aten/include/kael/native/vec_math.h, Note
[Vectorised math]) and prints their coefficients as C hex literals with each fit's error.

    .venv/bin/python tools/fit_math_poly.py

Each fit is a weighted least-squares fit on Chebyshev nodes computed with mpmath at 60 digits
(close to the minimax polynomial of the same degree); the error printed is the largest
relative (absolute for Q) error on a dense grid before the coefficients are rounded to
float or double. mpmath comes with torch (through sympy).
"""
from __future__ import annotations

import struct

import mpmath as mp

mp.mp.dps = 60


def fit(fn, lo, hi, deg, rel=True, weight=None):
    """Coefficients c0..c_deg of sum c_i u^i ~ fn(u) on [lo, hi], and the largest error: relative
    (rel), absolute, or absolute times weight(u) when a weight is given."""
    npts = 6 * (deg + 1)
    nodes = [(lo + hi) / 2 + (hi - lo) / 2 * mp.cos(mp.pi * (k + mp.mpf(1) / 2) / npts) for k in range(npts)]
    a = mp.matrix(npts, deg + 1)
    b = mp.matrix(npts, 1)
    for i, u in enumerate(nodes):
        y = fn(u)
        w = weight(u) if weight else 1 / abs(y) if rel else 1
        for j in range(deg + 1):
            a[i, j] = u ** j * w
        b[i] = y * w
    sol = mp.qr_solve(a, b)[0]
    c = [sol[j] for j in range(deg + 1)]
    err = 0
    for k in range(2001):
        u = lo + (hi - lo) * k / 2000
        y = fn(u)
        p = sum(c[j] * u ** j for j in range(deg + 1))
        err = max(err, abs(p - y) * weight(u) if weight else abs(p - y) / (abs(y) if rel else 1))
    return c, err


def as_float(v):
    return struct.unpack("f", struct.pack("f", float(v)))[0].hex().replace("0000000p", "p") + "f"


def as_double(v):
    return float(v).hex()


def show(name, coeffs, err, single):
    lits = [as_float(c) if single else as_double(c) for c in coeffs]
    print(f"{name} ({'float' if single else 'double'}, degree {len(coeffs) - 1}, error {mp.nstr(err, 3)}):")
    print("    " + ", ".join(lits))


def main():
    ln2 = mp.log(2)
    half = ln2 / 2 * mp.mpf("1.002")  # a little beyond ln2/2: the reduction without FMA

    def exp_p(r):  # exp(r) = 1 + r + r^2 P(r)
        return (mp.exp(r) - 1 - r) / r ** 2 if r != 0 else mp.mpf(1) / 2

    def log_p(z):  # log(1 + f) = 2s + s z P(z), z = s^2
        s = mp.sqrt(z)
        return (2 * mp.atanh(s) - 2 * s) / (s * z) if z != 0 else mp.mpf(2) / 3

    def erf_ratio(z):  # erf(x) / x as a function of z = x^2; erf(x) = x + x P(z), P = that - 1
        return mp.erf(mp.sqrt(z)) / mp.sqrt(z) if z != 0 else 2 / mp.sqrt(mp.pi)

    def erf_small(deg):
        c, err = fit(erf_ratio, mp.mpf(0), mp.mpf(1), deg)
        return [c[0] - 1] + c[1:], err

    zmax = (1 / (3 + 2 * mp.sqrt(2))) ** 2 * mp.mpf("1.002")  # s = f / (2 + f), f in [sqrt(1/2) - 1, sqrt(2) - 1]
    for single, exp_deg, log_deg, erf_deg in ((True, 4, 2, 6), (False, 9, 6, 11)):
        show("exp_p", *fit(exp_p, -half, half, exp_deg), single)
        show("log_p", *fit(log_p, mp.mpf(0), zmax, log_deg), single)
        show("erf_small", *erf_small(erf_deg), single)

    # float: erfc(x) = 2^W(x - xmid) for 1 <= x <= 4, W ~ log2(erfc), fitted for the absolute
    # error of erfc (the error erf = 1 - erfc gets), that is W's error weighted by erfc(x) ln2.
    # Expanded at 1, where erfc is largest, so that W's terms do not cancel there.
    xmid = mp.mpf(1)

    def w_erfc(u):
        return mp.log(mp.erfc(u + xmid)) / ln2
    print(f"kErfMid = {as_float(xmid)}")
    show("erfc_w (x in [1, 4], absolute error of erfc)",
         *fit(w_erfc, 1 - xmid, 4 - xmid, 5, weight=lambda u: mp.erfc(u + xmid) * ln2), True)

    # float: 2^f = 1 + f P(f) on |f| <= 1/2 (exp2_moderate).
    def exp2_p(f):
        return (mp.power(2, f) - 1) / f if f != 0 else ln2
    show("exp2_moderate's P", *fit(exp2_p, -mp.mpf("0.50005"), mp.mpf("0.50005"), 5), True)

    # float gelu: Phi(-a) = 2^V(a) for 0 <= a <= 4 sqrt(2) (absolute error of V: the relative
    # error of Phi(-a)).
    show("gelu_v (a in [0, 4 sqrt(2)])",
         *fit(lambda a: mp.log(mp.ncdf(-a)) / ln2, mp.mpf(0), 4 * mp.sqrt(2), 11, rel=False), True)

    # float gelu where the build has the SIMD forms: E = Phi(-a) itself, 31 pieces of a degree-5
    # polynomial in u = a c - j, j = round(a c), c = kGeluPieces, a in [0, 30.5 / c] (relative
    # error of E), and a piece 31 of zeros: E = 0 beyond, where |x| E < 2^-24.
    c = mp.mpf(5.375)
    deg = 5
    print(f"kGeluPieces = {as_float(c)}; kGeluPiece[i][j]: the coefficient of u^i of piece j")
    rows = [[] for _ in range(deg + 1)]
    worst = 0
    for j in range(32):
        if j == 31:
            cs = [mp.mpf(0)] * (deg + 1)
        else:
            lo, hi = max(mp.mpf(j) - mp.mpf("0.5"), mp.mpf(0)), mp.mpf(j) + mp.mpf("0.5")
            cs, err = fit(lambda u, j=j: mp.ncdf(-(u + j) / c), lo - j, hi - j, deg)
            worst = max(worst, err)
        for i in range(deg + 1):
            rows[i].append(as_float(cs[i]))
    print(f"    (largest relative error of the fits {mp.nstr(worst, 3)}; "
          f"|x| Phi(-|x|) at the cut 30.5 / c: {mp.nstr(30.5 / c * mp.ncdf(-30.5 / c), 3)})")
    for i in range(deg + 1):
        print("    {" + ", ".join(rows[i]) + "},")

    # double: erfc(x) = t exp(-x^2 + Q(t - tmid)) for 1 <= x <= 6, t = 1 / (1 + x/2).
    for single, xmax, deg in ((False, 6, 16),):
        tlo, thi = 1 / (1 + mp.mpf(xmax) / 2), 1 / (1 + mp.mpf(1) / 2)
        tmid = (tlo + thi) / 2

        def q(u, tmid=tmid):
            t = u + tmid
            x = 2 * (1 / t - 1)
            return mp.log(mp.erfc(x) / t) + x * x
        print(f"kErfT = {as_float(tmid) if single else as_double(tmid)}")
        show(f"erfc_q (x in [1, {xmax}])", *fit(q, tlo - tmid, thi - tmid, deg, rel=False), single)

    # logsumexp's float32 terms with AVX-512 (aten/src/native/cpu/logsumexp.cpp, lse_exp): the
    # bits of 2^(j / 16) rounded to float.
    print("kLseExp2Sixteenths' bits: " + ", ".join(
        f"0x{struct.unpack('<I', struct.pack('<f', float(mp.power(2, mp.mpf(j) / 16))))[0]:08x}" for j in range(16)))

    # Cody-Waite splits of ln2: k * hi is exact for |k| < 2^8 (float) and 2^11 (double).
    import math
    for single, bits in ((True, 16), (False, 42)):
        m, e = math.frexp(float(ln2))
        hi = mp.mpf(round(m * 2 ** bits) / 2 ** bits * 2 ** e)
        fmt = as_float if single else as_double
        print(f"ln2 = {fmt(hi)} + {fmt(ln2 - hi)}")


if __name__ == "__main__":
    main()
