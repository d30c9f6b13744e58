"""The forms of the contiguous pointwise loop that depend on the machine (kael/native/loops.h):
software prefetching (Note [Prefetching pointwise loops]), on CPUs that gain from it, and
streaming stores (Note [Streaming stores]), for outputs of half the last-level cache or more; and
the sums' prefetching of their reads (Note [Prefetching reductions' reads]), on CPUs that gain
from it, which also decides whether logsumexp reads its four parts side by side (Note [logsumexp
in four streams]).
KAEL_PREFETCH_STREAMS and KAEL_STREAMING_STORES force either form on or off in a child process, so
every machine runs all four combinations; each is compared with torch, and all four with each
other bit for bit."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

# Lengths around the loops' edges: below the prefetching threshold (16384), at it, tails that
# are no whole 1 KB block, outputs of a few 64-byte lines (streamed when forced), and
# one long enough for two threads (65536 elements per chunk and more).
LENGTHS = [100, 300, 16383, 16384, 16384 + 255, 3 * 16384 + 17, 2 * 65536 + 999]
# Offsets in elements: the inputs and the output start mid-block and off 64-byte boundaries.
OFFSETS = [0, 3]

CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    import kael
    lengths, offsets, path = eval(sys.argv[1]), eval(sys.argv[2]), sys.argv[3]
    rng = np.random.default_rng(7)
    res = {}

    def shifted(arr, off, dtype=None):
        # a kael tensor holding arr that starts off elements into its storage
        t = kael.empty(len(arr) + off, dtype=dtype or kael.from_numpy(arr[:1]).dtype)
        view = t[off:]
        view.copy_(kael.from_numpy(arr))
        return view

    for n in lengths:
        for off in offsets:
            a_np = rng.standard_normal(n).astype(np.float32)
            b_np = rng.standard_normal(n).astype(np.float32)
            i_np = rng.integers(-1000, 1000, n)
            a, b, i = shifted(a_np, off), shifted(b_np, off + 1), shifted(i_np, off)
            key = f"{n}_{off}"
            res["a_" + key], res["b_" + key], res["i_" + key] = a_np, b_np, i_np
            out = kael.empty(n + off)[off:]
            kael.add(a, b, out=out)  # an out= that starts off a 64-byte boundary
            res["add_" + key] = out.numpy()
            res["mul_" + key] = kael.mul(a, b).numpy()
            res["lt_" + key] = (a < b).numpy()  # 1-byte output
            res["iadd_" + key] = (i + 7).numpy()  # 8-byte output
            res["exp_" + key] = kael.exp(a).numpy()
            res["erf_" + key] = kael.erf(a).numpy()
            res["gelu_" + key] = kael.nn.functional.gelu(a).numpy()
            res["lse_" + key] = kael.logsumexp(a.reshape(1, n) * 4, 1).numpy()
            res["sum_" + key] = a.sum().numpy()  # float32 added in double
            res["dsum_" + key] = a.double().sum().numpy()  # the generic loop, 8-byte elements
            res["isum_" + key] = i.sum().numpy()
            res["bsum_" + key] = (a > 0).sum().numpy()  # 1-byte elements
            res["mean_" + key] = a.mean().numpy()
            res["double_" + key] = a.double().numpy()  # copies with conversion
            res["half_" + key] = a.half().float().numpy()
            res["ifloat_" + key] = i.float().numpy()
            m = a > 0  # bool to every kind of dtype: a select on the byte (ConvertBool in copy.cpp)
            for dt in ["float32", "float64", "float16", "bfloat16", "int64", "uint8", "bool"]:
                res[f"m{dt}_" + key] = m.to(getattr(kael, dt)).float().numpy()
            res["mstrided_" + key] = kael.stack([m, m], 1)[:, 1].double().numpy()  # a strided bool input
            c = kael.empty(n + off + 5)[off + 5:]
            c.copy_(a)  # a plain copy into an output off a 64-byte boundary
            res["copy_" + key] = c.numpy()
    # logsumexp rows of four parts whose blocks take different paths (Note [logsumexp in four
    # streams] in logsumexp.cpp): the parts side by side or one after another by the same switch
    n = 4 * 16384 + 37
    rows = np.tile(rng.standard_normal(n).astype(np.float32) * 4, (6, 1))
    rows[1, 40000:] += 50.0  # a rise inside a block of the third part: two passes there
    rows[2, 16384:32768] += 5000.0  # the second part's max beyond kLseDirect: its terms subtract it
    rows[3, 5], rows[3, 50000] = np.inf, np.nan
    rows[4, 16384:32768] = -np.inf  # a part of -inf
    rows[5] = np.linspace(-300, 300, n, dtype=np.float32)  # a rise in every block
    res["lse_rows"] = rows
    res["lse_parts"] = kael.logsumexp(kael.from_numpy(rows), 1).numpy()
    np.savez(path, **res)
    """
)

MODES = [("1", "1"), ("1", "0"), ("0", "1"), ("0", "0")]  # (prefetch, streaming stores)


def _run_child(tmp_path, prefetch, streaming, threads):
    out = tmp_path / f"loops_{prefetch}{streaming}_{threads}.npz"
    env = dict(os.environ, KAEL_PREFETCH_STREAMS=prefetch, KAEL_STREAMING_STORES=streaming,
               KAEL_NUM_THREADS=str(threads))
    proc = subprocess.run([sys.executable, "-c", CHILD, repr(LENGTHS), repr(OFFSETS), str(out)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    return dict(np.load(out))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("prefetch,streaming", MODES)
def test_contiguous_loops_match_torch_in_every_form(tmp_path, prefetch, streaming, threads):
    res = _run_child(tmp_path, prefetch, streaming, threads)
    gelu = torch.nn.functional.gelu
    exact = lambda got, want: torch.testing.assert_close(torch.from_numpy(got), want, rtol=0, atol=0)  # noqa: E731
    for n in LENGTHS:
        for off in OFFSETS:
            key = f"{n}_{off}"
            a, b = torch.from_numpy(res["a_" + key]), torch.from_numpy(res["b_" + key])
            i = torch.from_numpy(res["i_" + key])
            exact(res["add_" + key], a + b)
            exact(res["mul_" + key], a * b)
            exact(res["lt_" + key], a < b)
            exact(res["iadd_" + key], i + 7)
            exact(res["double_" + key], a.double())
            exact(res["half_" + key], a.half().float())
            exact(res["ifloat_" + key], i.float())
            for dt in ["float32", "float64", "float16", "bfloat16", "int64", "uint8", "bool"]:
                exact(res[f"m{dt}_" + key], (a > 0).to(getattr(torch, dt)).float())
            exact(res["mstrided_" + key], (a > 0).double())
            exact(res["copy_" + key], a)
            # against float64 references, within the float32 bounds of Note [Vectorised math]
            # (2 ulp for exp and erf, 50 ulp for gelu below -1; an ulp is at most 2^-23 relative)
            ad = a.double()
            for name, fn, ulps in [("exp", torch.exp, 2), ("erf", torch.erf, 2), ("gelu", gelu, 50)]:
                torch.testing.assert_close(torch.from_numpy(res[name + "_" + key]).double(), fn(ad),
                                           rtol=ulps * 2.0**-23, atol=1e-40, msg=lambda m: f"{name}: {m}")
            torch.testing.assert_close(torch.from_numpy(res["lse_" + key]),
                                       torch.logsumexp(a.reshape(1, n) * 4, 1), rtol=1e-6, atol=0)
            exact(res["isum_" + key], i.sum())
            exact(res["bsum_" + key], (a > 0).sum())
            # every float32 added in double: the float64 sum, rounded once (and the error of the
            # double additions, far below a float32 ulp of the sum of |a|)
            ulp_bound = float(ad.abs().sum()) * 2.0**-24
            for name, want in [("sum", ad.sum()), ("mean", ad.mean())]:
                got = torch.from_numpy(res[name + "_" + key])
                assert got.dtype == torch.float32, name
                scale = 1.0 if name == "sum" else 1.0 / n
                torch.testing.assert_close(got.double(), want, rtol=0, atol=2 * ulp_bound * scale,
                                           msg=lambda m: f"{name}: {m}")
            torch.testing.assert_close(torch.from_numpy(res["dsum_" + key]), ad.sum(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(torch.from_numpy(res["lse_parts"]), torch.logsumexp(torch.from_numpy(res["lse_rows"]), 1),
                               rtol=1e-6, atol=0, equal_nan=True)


@pytest.mark.parametrize("threads", [1, 2])
def test_loop_forms_change_no_value(tmp_path, threads):
    results = [_run_child(tmp_path, p, s, threads) for p, s in MODES]
    for other in results[1:]:
        for name, value in results[0].items():
            np.testing.assert_array_equal(value, other[name], err_msg=name)


def test_bool_bytes_other_than_one_convert_as_true():
    # a bool tensor over bytes that are neither 0 nor 1 (a foreign buffer: NumPy's view of uint8 as
    # bool): each nonzero byte is true in every conversion, as in NumPy and torch
    import kael
    raw = np.array([0, 1, 2, 255, 0, 128] * 3000, dtype=np.uint8)
    as_bool = raw.view(np.bool_)
    t = kael.from_numpy(as_bool)
    want = torch.from_numpy(raw != 0)
    for dt in ["float32", "float64", "int32", "float16", "bool"]:
        got = t.to(getattr(kael, dt)).numpy()
        np.testing.assert_array_equal(got.astype(np.float64), want.to(getattr(torch, dt)).double().numpy(), err_msg=dt)
