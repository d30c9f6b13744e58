"""Inputs that used to reach undefined behaviour give PyTorch's results by defined means:
integer overflow wraps (Note [Wrapping integer arithmetic]), float -> integer conversions give
x86-64's results (Note [Conversions between dtypes]) and bool bytes other than 0/1 never reach a
load (Note [Bool bytes]). The kael side of each case runs in a fresh interpreter, so that under
the sanitizer build (tools/run_sanitizers.sh, which stops at the first report) a case that
still hits undefined behaviour fails alone, with the sanitizer's report as its message."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import kael

NAN, INF = float("nan"), float("inf")
I64_MAX, I64_MIN = 2 ** 63 - 1, -2 ** 63


def in_subprocess(body):
    """Runs `body` (which sets `result` to something JSON can hold) with kael in a new
    interpreter and returns result."""
    code = "import json, kael, numpy as np\nnan, inf = float('nan'), float('inf')\n" + body + \
           "\nprint(json.dumps(result))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ))
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def same(kael_values, torch_values):
    def norm(v):
        if isinstance(v, list):
            return [norm(x) for x in v]
        return "nan" if isinstance(v, float) and v != v else v
    assert norm(kael_values) == norm(torch_values)


# ------------------------------------------------------------ integer overflow
INT_CASES = {
    "add": "lib.tensor([2**63 - 1, -2**63, 5]) + 1",
    "add-tensors": "lib.tensor([2**63 - 1, -2**63]) + lib.tensor([2**63 - 1, -1])",
    "add-alpha": "lib.add(lib.tensor([1, -1]), lib.tensor([2**62, 2**62]), alpha=4)",
    "radd": "(2**62) + lib.tensor([2**62, -2**63])",
    "sub": "lib.tensor([-2**63, 2**63 - 1]) - lib.tensor([1, -1])",
    "sub-alpha": "lib.sub(lib.tensor([-2**63, 0]), lib.tensor([3, 2**62]), alpha=-4)",
    "rsub": "(-2**63) - lib.tensor([1, 2])",
    "mul": "lib.tensor([2**62, -2**63, 3037000500]) * lib.tensor([4, -1, 3037000500])",
    "mul-scalar": "lib.tensor([2**62, -2**62]) * 3",
    "neg": "-lib.tensor([-2**63, 2**63 - 1, 0])",
    "abs": "lib.abs(lib.tensor([-2**63, -5, 2**63 - 1]))",
    "pow": "lib.tensor([3, -3, 2]) ** lib.tensor([41, 41, 64])",
    "maximum": "lib.maximum(lib.tensor([-2**63, 2**63 - 1]), lib.tensor([2**63 - 1, -2**63]))",
    "add_": "lib.tensor([2**63 - 1, 7]).add_(lib.tensor([2**63 - 1, 1]))",
    "mul-out": "lib.mul(lib.tensor([2**62]), 2, out=lib.zeros(1, dtype=lib.int64))",
    "neg-strided": "lib.neg(lib.tensor([[-2**63, 1], [2, -2**63]]).T)",
    "add-broadcast": "lib.tensor([[2**63 - 1], [-2**63]]) + lib.tensor([1, -1, 2**63 - 1])",
    "add-large": "(lib.full((70000,), 2**63 - 1) + lib.arange(70000)).sum()",
    "sum": "lib.tensor([2**62, 2**62, 2**62, 2**62, 5]).sum()",
    "sum-dim": "lib.tensor([[2**63 - 1, 2**63 - 1], [1, -2**63]]).sum(dim=0)",
    "sum-bool-to-int": "lib.tensor([True, True]).sum()",
    "matmul": "lib.tensor([[2**62, 2**62], [-2**63, 1]]) @ lib.tensor([[4, 1], [-1, 2**62]])",
}


@pytest.mark.parametrize("name", list(INT_CASES))
def test_int64_overflow_wraps_like_torch(name):
    expr = INT_CASES[name]
    k = in_subprocess(f"lib = kael\nresult = ({expr}).tolist()")
    t = eval(expr, {"lib": torch}).tolist()
    assert k == t


def test_int64_max_plus_one_is_int64_min():
    assert (kael.tensor([2 ** 63 - 1]) + 1).tolist() == [I64_MIN] == (torch.tensor([2 ** 63 - 1]) + 1).tolist()


# ------------------------------------------------- float -> integer conversions
SPECIAL = [NAN, INF, -INF, 1e30, -1e30, 2.0 ** 63, -2.0 ** 63, 2.0 ** 31, -2.0 ** 31 - 1, 3e9, -3e9, 300.5, -1.5,
           255.9, 256.0, -0.9, 65543.0, 2.0 ** 64, 0.0, -0.0]


@pytest.mark.parametrize("src", ["float32", "float64"])
@pytest.mark.parametrize("dst", ["int64", "bool"])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "large"])
def test_float_to_integer_conversion_matches_torch(src, dst, layout):
    make = {"contiguous": "x",
            "strided": "x.reshape(len(x), 1).expand(len(x), 2).contiguous().T[0]",
            "large": "x.expand(5000, len(x)).reshape(5000 * len(x))"}[layout]
    body = (f"lib = kael\nx = lib.tensor({SPECIAL!r}, dtype=lib.float64).to(lib.{src})\n"
            f"y = ({make}).to(lib.{dst})\nresult = y.tolist()[:{len(SPECIAL)}]")
    k = in_subprocess(body)
    lib = torch
    x = torch.tensor(SPECIAL, dtype=torch.float64).to(getattr(torch, src))
    t = eval(make, {"lib": torch, "x": x}).to(getattr(torch, dst)).tolist()[:len(SPECIAL)]
    same(k, t)


def test_nan_inf_to_int64_give_int64_min_as_in_torch():
    data = [NAN, INF, -INF, 1e30]
    expected = torch.tensor(data).to(torch.int64).tolist()
    assert expected == [I64_MIN] * 4
    assert in_subprocess(f"result = kael.tensor({data!r}).to(kael.int64).tolist()") == expected
    assert in_subprocess(f"result = kael.tensor({data!r}).long().tolist()") == expected


@pytest.mark.parametrize("expr", [
    "lib.tensor([nan, 1e30, 2.5]).sum(dtype=lib.int64)",
    "lib.tensor([[nan, 1.0], [inf, 2.0]]).sum(dim=1, dtype=lib.int64)",
    "lib.tensor([nan, -inf]).to(lib.float64).to(lib.int64)",
    "lib.arange(3).to(lib.float32).add_(lib.tensor([nan, inf, 1.5]))",
    "lib.tensor([1e30, -1e30]).long().to(lib.float32)",
])
def test_conversions_inside_other_ops(expr):
    k = in_subprocess(f"lib = kael\nresult = ({expr}).tolist()")
    t = eval(expr, {"lib": torch, "nan": NAN, "inf": INF}).tolist()
    same(k, t)


def test_setitem_converts_floats_into_int64_like_torch():
    body = "x = kael.zeros(4, dtype=kael.int64)\nx[:] = kael.tensor([nan, inf, -1e30, 7.9])\nresult = x.tolist()"
    t = torch.zeros(4, dtype=torch.int64)
    t[:] = torch.tensor([NAN, INF, -1e30, 7.9])
    assert in_subprocess(body) == t.tolist()


# ------------------------------------------------------------------ bool bytes
WEIRD_BOOL_BYTES = [0, 1, 2, 255, 128, 0, 7, 1]


def weird_bools():
    return np.frombuffer(bytes(WEIRD_BOOL_BYTES), dtype=np.bool_).reshape(2, 4)


@pytest.mark.parametrize("expr", [
    "t.tolist()",
    "t.sum().item()",
    "t.sum(dim=0).tolist()",
    "t.to(lib.int64).tolist()",
    "t.to(lib.float32).tolist()",
    "(t == lib.ones(2, 4, dtype=lib.bool)).tolist()",
    "(t + t).tolist()",
    "(t * 3).tolist()",
    "lib.maximum(t, t.T.reshape(2, 4)).tolist()",
    "t.T.contiguous().tolist()",
    "t.clone().tolist()",
    "t[1, 1].item()",
    "t.to(lib.int64).sum().item()",
])
def test_bool_bytes_from_numpy_are_normalised(expr):
    # the same expression on the normalised array (every nonzero byte is True) in torch
    code = f"arr = np.frombuffer(bytes({WEIRD_BOOL_BYTES!r}), dtype=np.bool_).reshape(2, 4)\n" \
           f"lib = kael\nt = kael.tensor(arr)\nresult = {expr}"
    k = in_subprocess(code)
    t = eval(expr, {"lib": torch, "t": torch.tensor(weird_bools() != 0)})
    assert k == t


def test_bool_bytes_of_a_strided_numpy_view_are_normalised():
    arr = np.frombuffer(bytes(WEIRD_BOOL_BYTES * 2), dtype=np.bool_).reshape(4, 4)[::2, 1::2]
    expected = (arr.view(np.uint8) != 0).tolist()
    code = f"arr = np.frombuffer(bytes({WEIRD_BOOL_BYTES * 2!r}), dtype=np.bool_).reshape(4, 4)[::2, 1::2]\n" \
           "t = kael.tensor(arr)\nresult = [t.tolist(), t.to(kael.int64).tolist(), t.sum().item()]"
    k = in_subprocess(code)
    assert k == [expected, [[int(v) for v in row] for row in expected], sum(map(sum, expected))]


def test_empty_bool_holds_only_bools():
    # a block the cache hands out again still holds the bytes of a float tensor (1.0f is
    # 00 00 80 3f); empty() must not show them as bools
    code = ("for _ in range(4):\n"
            "    f = kael.full((64,), 1.0)\n"
            "    del f\n"
            "    b = kael.empty(256, dtype=kael.bool)\n"
            "result = [b.to(kael.int64).sum().item() <= 256, sorted(set(b.to(kael.int64).tolist())),\n"
            "          b.sum().item() == sum(b.tolist())]")
    ok, values, consistent = in_subprocess(code)
    assert ok and set(values) <= {0, 1} and consistent
