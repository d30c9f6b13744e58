"""Bugs the fuzz suite (test_fuzz.py) found, each as a regression test against PyTorch. The
kael side of each runs in a fresh interpreter, so a crash fails the test instead of the suite."""
import subprocess
import sys

import numpy as np
import pytest
import torch

import kael


def run_kael(code):
    """Runs `code` with kael in a new interpreter; returns its stdout (last line)."""
    proc = subprocess.run([sys.executable, "-c", "import kael\n" + code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr[-3000:]}"
    return proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow", "maximum", "eq"])
def test_out_with_only_number_inputs_raises_instead_of_crashing(op):
    # Both inputs numbers, out= a tensor: out gave the call its dispatch key and the loop ran
    # over no tensor (SIGSEGV). The error is the one without out= (codegen/README.md).
    out = run_kael(f"""
o = kael.zeros(2)
try:
    kael.{op}(1.0, 2.0, out=o)
except TypeError as e:
    print(str(e).split(": ", 1)[-1] if "{op}:" in str(e) else "wrong message: " + str(e))
else:
    print("no error")
assert o.tolist() == [0.0, 0.0]
""")
    assert out.endswith(f"{op}: expected at least one tensor argument, got only numbers"), out
    with pytest.raises(TypeError, match=f"{op}: expected at least one tensor argument"):
        getattr(kael, op)(1.0, 2.0)


@pytest.mark.parametrize("method", ["add_", "sub_", "mul_", "copy_", "neg"])
def test_in_place_write_into_an_empty_expanded_tensor_is_allowed_like_torch(method):
    # An expanded (2, 0, 3) has no element to write twice; kael raised "more than one element
    # of the written-to tensor refers to a single memory location".
    for lib in (torch, kael):
        x = lib.zeros(1, 0, 3).expand(2, 0, 3)
        if method == "neg":
            r = lib.neg(lib.ones(2, 0, 3), out=x)
        elif method == "copy_":
            r = x.copy_(lib.ones(2, 0, 3))
        else:
            r = getattr(x, method)(1)
        assert r is x and tuple(x.shape) == (2, 0, 3)
    for lib in (torch, kael):  # with elements it still raises
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            lib.zeros(1, 3).expand(2, 3).add_(1)


@pytest.mark.parametrize("method", ["size", "stride"])
def test_size_and_stride_take_any_integer_like_every_int_parameter(method):
    # size(np.int64(0)) raised TypeError; torch takes it, and so do kael's other int parameters.
    t, k = torch.zeros(2, 3), kael.zeros(2, 3)
    for dim in (np.int64(1), np.int32(-1), np.uint8(0)):
        assert getattr(k, method)(dim) == getattr(t, method)(dim)
        assert getattr(k, method)(dim=dim) == getattr(t, method)(dim=dim)
    for bad in (True, 1.0, "1", kael.tensor(1)):
        with pytest.raises(TypeError, match=f"{method}\\(\\) received an invalid combination"):
            getattr(k, method)(bad)
    with pytest.raises(OverflowError):
        getattr(k, method)(2 ** 64)
    with pytest.raises(IndexError):
        getattr(k, method)(np.int64(2))


@pytest.mark.parametrize("value", [np.float32(2.5), np.float16(-1.5), np.bool_(True), np.bool_(False),
                                   np.int64(3), np.uint8(7), np.float64(0.25)], ids=lambda v: type(v).__name__)
def test_numpy_scalars_are_scalars_like_torch(value):
    # np.float32 and np.bool_ have __getitem__, so kael's parser took them for sequences and
    # rejected them as Scalars and as number operands (TypeError); torch takes them.
    for expr in ("lib.add(lib.ones(2, dtype=lib.int64), v)", "lib.full((2,), v)", "lib.ones(2).fill_(v)",
                 "lib.mul(v, lib.arange(3))", "lib.ones(2, dtype=lib.int32) - v"):
        t = eval(expr, {"lib": torch, "v": value})
        k = eval(expr, {"lib": kael, "v": value})
        assert k.tolist() == t.tolist() and repr(k.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], expr
    with pytest.raises(TypeError):
        kael.add(kael.ones(2), np.ones(2))  # arrays stay out: they have a length


@pytest.mark.parametrize("scalar", [np.int64(2), np.float32(2.0), np.float64(2.0), np.bool_(True)],
                         ids=lambda v: type(v).__name__)
def test_numpy_scalar_on_the_left_of_an_operator_gives_a_tensor(scalar):
    # Without __array_priority__ NumPy answered np.int64(2) + t itself, with an object array of
    # 0-d tensors; like torch's tensors, kael's make NumPy defer to the reflected operator.
    t, k = torch.arange(3), kael.arange(3)
    for op in ("+", "-", "*", "/", "<", "=="):
        tr, kr = eval(f"s {op} x", {"s": scalar, "x": t}), eval(f"s {op} x", {"s": scalar, "x": k})
        assert isinstance(kr, kael.Tensor), (op, type(kr))
        assert kr.tolist() == tr.tolist(), op
    assert kael.ones(1).__array_priority__ == torch.ones(1).__array_priority__ == 1000


@pytest.mark.parametrize("offset", [2 ** 63 - 1, 2 ** 63 // 2 + 1, 2 ** 62 + 7])
def test_as_strided_offset_near_int64_max_raises_instead_of_reading_anywhere(offset):
    # (last + 1) * itemsize overflowed, passed the bounds check, and gave a view far outside
    # its storage (the long fuzz run: SIGSEGV on reading it).
    out = run_kael(f"""
t = kael.zeros(4, 1, dtype=kael.float32)[1:]
try:
    r = kael.as_strided(t, [], [], {offset})
except RuntimeError as e:
    print("as_strided" in str(e))
else:
    print("no error", r.tolist())
""")
    assert out == "True", out
    with pytest.raises(RuntimeError):
        torch.as_strided(torch.zeros(4, 1)[1:], [], [], offset)
