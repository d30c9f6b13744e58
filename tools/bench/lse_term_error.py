#!/usr/bin/env python3
"""The relative error of logsumexp's float32 terms exp(d), in a float32 emulation with NumPy, for
the form kael takes (Note [logsumexp in one pass] in aten/src/native/cpu/logsumexp.cpp: a
16-entry table of 2^(j / 16) and a degree-3 polynomial) and for the degree-2 forms that
tools/bench/lse_probe.cpp times beside it.

    .venv/bin/python tools/bench/lse_term_error.py

Each form runs its operations as the loop does: t = d log2e + shift (FMA), k = t - shift,
r = d - k L (FMA, L the float32 ln2), Horner's FMAs, the table's float entry times 2^q, one
product. An FMA is emulated as the float64 product of two floats (exact) plus the addend, rounded
to float64 and then to float32 (a double rounding, which moves at most a last bit, rarely). The
inputs are 4M uniform d in [-8, 0] and 2M evenly spaced ones, with the reference at 0 (M = 0);
the error is |term / exp(d) - 1| against float64's exp.
"""
from __future__ import annotations

import numpy as np

F32 = np.float32
LN2_F32 = F32(0.693147182464599609375)  # 0x1.62e430p-1, L
LOG2E_F32 = F32(1.44269502162933349609375)  # 0x1.715476p+0


def fma(a, b, c):
    return (a.astype(np.float64) * b.astype(np.float64) + np.float64(c)).astype(F32)


def terms(d, entries, coeffs):
    """exp(d) with steps of ln2 / entries and the polynomial coeffs (highest degree first)."""
    shift = F32(1.5 * 2.0 ** (23 - int(np.log2(entries))))  # t's ulp is 1 / entries
    t = fma(d, np.full_like(d, LOG2E_F32), shift)
    k = (t - shift).astype(F32)
    r = fma(k, np.full_like(d, -LN2_F32), d)
    p = np.full_like(d, coeffs[0])
    for c in coeffs[1:]:
        p = fma(p, r, c)
    j = np.rint((k * entries) % entries).astype(np.int64) % entries
    table = np.array([F32(2.0 ** (i / entries)) for i in range(entries)], dtype=np.float64)
    scale = (table[j] * 2.0 ** np.floor(k.astype(np.float64))).astype(F32)  # exact: a power of 2 times a float
    return (scale.astype(np.float64) * p.astype(np.float64)).astype(F32)


def fitted_degree2(h):
    """A degree-2 polynomial for e^r on |r| <= h: relative least squares on Chebyshev nodes
    (close to minimax), coefficients highest degree first."""
    x = np.cos(np.pi * (np.arange(200) + 0.5) / 200) * h
    a = np.stack([np.ones_like(x), x, x * x], 1) / np.exp(x)[:, None]
    c = np.linalg.lstsq(a, np.ones_like(x), rcond=None)[0]
    return [F32(c[2]), F32(c[1]), F32(c[0])]


def main():
    rng = np.random.default_rng(0)
    d = np.concatenate([rng.uniform(-8, 0, 4_000_000), np.linspace(-8, 0, 2_000_001)]).astype(F32)
    exact = np.exp(d.astype(np.float64))
    forms = [
        ("16 entries, degree 3 (kael)", 16, [F32(float.fromhex("0x1.555556p-3")), F32(0.5), F32(1), F32(1)]),
        ("32 entries, degree 2, fitted", 32, fitted_degree2(np.log(2) / 64)),
        ("32 entries, degree 2, Taylor", 32, [F32(0.5), F32(1), F32(1)]),
        ("16 entries, degree 2, Taylor", 16, [F32(0.5), F32(1), F32(1)]),
    ]
    print(f"{'form':32s} {'max':>9s} {'mean':>9s}")
    for name, entries, coeffs in forms:
        err = np.abs(terms(d, entries, coeffs).astype(np.float64) / exact - 1)
        print(f"{name:32s} {err.max():9.3g} {err.mean():9.3g}")


if __name__ == "__main__":
    main()
