"""Geometry arguments of the convolution, pooling and patch ops large enough that their products
(kernel * dilation, kernel_h * kernel_w) overflow 64 bits: each call raises RuntimeError naming the
op, never a crash (fold with a huge kernel once divided by an overflowed zero: SIGFPE). Run in a
subprocess, so a crash fails the test instead of the suite."""
import subprocess
import sys

import pytest

BIG = 2 ** 62
CASES = {
    "conv2d dilation": f"kael.conv2d(kael.randn(1, 2, 6, 6), kael.randn(3, 2, 3, 3), None, [1, 1], [0, 0], [{BIG}, 1])",
    "conv2d padding": f"kael.conv2d(kael.randn(1, 2, 6, 6), kael.randn(3, 2, 3, 3), None, [1, 1], [{BIG}, 0])",
    "conv_transpose2d stride": f"kael.conv_transpose2d(kael.randn(1, 2, 6, 6), kael.randn(2, 3, 3, 3), None, [{BIG}, 1])",
    "conv1d stride": f"kael.conv1d(kael.randn(1, 2, 6), kael.randn(3, 2, 3), None, [{BIG}])",
    "max_pool2d kernel": f"F.max_pool2d(kael.randn(1, 2, 6, 6), {BIG})",
    "max_pool2d dilation": f"F.max_pool2d(kael.randn(1, 2, 6, 6), 2, 1, 0, {BIG})",
    "avg_pool2d kernel": f"F.avg_pool2d(kael.randn(1, 2, 6, 6), [{BIG}, {BIG}])",
    "unfold kernel": f"F.unfold(kael.randn(1, 2, 6, 6), [{BIG}, {BIG}])",
    "fold kernel": f"F.fold(kael.randn(1, 4, 9), (4, 4), [{BIG}, {BIG}])",
    "fold stride": f"F.fold(kael.randn(1, 4, 9), (4, 4), 2, 1, 0, {BIG})",
    "interpolate size": f"F.interpolate(kael.randn(1, 2, 6, 6), size=({BIG}, 2))",
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_huge_geometry_argument_raises_runtime_error(case):
    code = ("import kael, kael.nn.functional as F\n"
            f"try:\n    {CASES[case]}\nexcept RuntimeError as e:\n    print('RuntimeError', e)\n"
            "else:\n    print('no error')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{case}: crashed with {proc.returncode}: {proc.stderr[-400:]}"
    assert proc.stdout.startswith("RuntimeError"), proc.stdout + proc.stderr[-400:]
