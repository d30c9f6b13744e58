"""The prefetching form of the contiguous pointwise loops and of logsumexp (Note [Prefetching
pointwise loops] in aten/include/kael/native/loops.h) runs only on CPUs that gain from it; these
tests run it on every machine by setting KAEL_PREFETCH_STREAMS in a child process, and compare
both forms with torch."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

# Lengths around the loop's edges: below the prefetching threshold (16384), exactly at it, and
# with tails that are no whole 1 KB block; offsets make the inputs start mid-block.
LENGTHS = [16383, 16384, 16384 + 1, 16384 + 255, 3 * 16384 + 17]
OFFSETS = [0, 3]

CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    import kael
    lengths, offsets, out = eval(sys.argv[1]), eval(sys.argv[2]), sys.argv[3]
    rng = np.random.default_rng(7)
    res = {}
    for n in lengths:
        for off in offsets:
            a_np = rng.standard_normal(n + off).astype(np.float32)
            b_np = rng.standard_normal(n + off).astype(np.float32)
            a = kael.from_numpy(a_np)[off:]
            b = kael.from_numpy(b_np)[off:]
            key = f"{n}_{off}"
            res["a_" + key], res["b_" + key] = a_np[off:], b_np[off:]
            res["add_" + key] = (a + b).numpy()
            res["mul_" + key] = kael.mul(a, b).numpy()
            res["exp_" + key] = kael.exp(a).numpy()
            res["erf_" + key] = kael.erf(a).numpy()
            res["gelu_" + key] = kael.nn.functional.gelu(a).numpy()
            res["lse_" + key] = kael.logsumexp(a.reshape(1, n) * 4, 1).numpy()
            res["double_" + key] = a.double().numpy()
    np.savez(out, **res)
    """
)


def _run_child(tmp_path, mode):
    out = tmp_path / f"prefetch_{mode}.npz"
    env = dict(os.environ, KAEL_PREFETCH_STREAMS=mode, KAEL_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", CHILD, repr(LENGTHS), repr(OFFSETS), str(out)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    return dict(np.load(out))


@pytest.mark.parametrize("mode", ["1", "0"])
def test_pointwise_loops_match_torch_with_and_without_prefetching(tmp_path, mode):
    res = _run_child(tmp_path, mode)
    gelu = torch.nn.functional.gelu
    for n in LENGTHS:
        for off in OFFSETS:
            key = f"{n}_{off}"
            a, b = torch.from_numpy(res["a_" + key]), torch.from_numpy(res["b_" + key])
            torch.testing.assert_close(torch.from_numpy(res["add_" + key]), a + b, rtol=0, atol=0)
            torch.testing.assert_close(torch.from_numpy(res["mul_" + key]), a * b, rtol=0, atol=0)
            torch.testing.assert_close(torch.from_numpy(res["double_" + key]), a.double(), rtol=0, atol=0)
            # against float64 references, within the float32 bounds of Note [Vectorised math]
            # (2 ulp for exp and erf, 50 ulp for gelu below -1; an ulp is at most 2^-23 relative)
            ad = a.double()
            for name, fn, ulps in [("exp", torch.exp, 2), ("erf", torch.erf, 2), ("gelu", gelu, 50)]:
                torch.testing.assert_close(torch.from_numpy(res[name + "_" + key]).double(), fn(ad),
                                           rtol=ulps * 2.0**-23, atol=1e-40, msg=lambda m: f"{name}: {m}")
            torch.testing.assert_close(torch.from_numpy(res["lse_" + key]),
                                       torch.logsumexp(a.reshape(1, n) * 4, 1), rtol=1e-6, atol=0)


def test_prefetching_changes_no_value(tmp_path):
    with_pf, without = _run_child(tmp_path, "1"), _run_child(tmp_path, "0")
    for name, value in with_pf.items():
        np.testing.assert_array_equal(value, without[name], err_msg=name)
