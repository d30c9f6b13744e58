"""Pointwise ops whose inputs repeat along the loop (Note [Repeating inputs] in
kael/native/loops.h): a per-channel tensor broadcast against a channels-last one, and 0-d tensors
beside full ones. The loop copies such an input into a buffer that repeats it, so every case is
checked against torch and against the same op on row-major inputs (the same values, element for
element), over channel counts around the loop's limits, shapes whose row count has no divisor
that fits, dtypes, and the in-place and out= forms."""
import numpy as np
import pytest
import torch

import kael

RNG = np.random.default_rng(17)

# (N, C, H, W): short rows of C (the per-channel case), C at the limits (63, 64), a row count (H * W * N)
# that is prime (no rows to merge), and long rows that a constant input splits.
SHAPES = [(2, 8, 5, 6), (3, 3, 4, 4), (1, 16, 7, 7), (2, 63, 3, 3), (2, 64, 2, 3), (1, 5, 1, 13), (4, 1, 9, 9),
          (1, 2, 31, 37), (2, 3, 40, 40)]
DTYPES = ["float32", "float64", "int32", "bfloat16"]


def tensors(lib, shape, dtype):
    n, c, h, w = shape
    x = RNG.standard_normal(shape) * 4
    y = RNG.standard_normal(shape) * 4
    per_channel = RNG.standard_normal((1, c, 1, 1)) * 4 + 0.5
    zero_d = np.array(RNG.standard_normal() * 4 + 0.25)
    mask = RNG.random(shape) > 0.5
    if dtype == "int32":
        x, y, per_channel, zero_d = (np.round(a).astype(np.int32) for a in (x, y, per_channel, zero_d))
    out = {}
    for name, a in (("x", x), ("y", y), ("c", per_channel), ("s", zero_d), ("m", mask)):
        t = lib.tensor(a)
        if name != "m" and dtype != "int32":
            t = t.to(getattr(lib, dtype))
        out[name] = t
    return out


CASES = {
    "mul_channel": lambda L, t: t["x"] * t["c"],
    "add_channel_rev": lambda L, t: t["c"] + t["x"],
    "sub_channel": lambda L, t: t["x"] - t["c"],
    "where_channel": lambda L, t: L.where(t["m"], t["x"], t["c"]),
    "where_zero_d": lambda L, t: L.where(t["m"], t["x"], t["s"]),
    "where_zero_d_first": lambda L, t: L.where(t["m"], t["s"], t["y"]),
    "clamp_channel": lambda L, t: L.clamp(t["x"], min=t["c"] - 1, max=t["c"] + 1),
    "maximum_channel": lambda L, t: L.maximum(t["x"], t["c"]),
    "eq_zero_d": lambda L, t: t["x"] == t["s"],
    "mul_zero_d": lambda L, t: t["x"] * t["s"],
}
FLOAT_ONLY = {"lerp_channel": lambda L, t: L.lerp(t["x"], t["y"], t["c"].abs() / 8),
              "lerp_zero_d": lambda L, t: L.lerp(t["x"], t["y"], t["s"].abs() / 8)}


def channels_last(L, t):
    return {k: (v.contiguous(memory_format=L.channels_last) if k in ("x", "y", "m") else v) for k, v in t.items()}


def as_numpy(t):
    return (t.float() if t.dtype in (kael.bfloat16, torch.bfloat16) else t).detach().numpy()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_against_torch_and_row_major(shape, dtype):
    cases = dict(CASES, **({} if dtype == "int32" else FLOAT_ONLY))
    state = RNG.bit_generator.state
    kt = tensors(kael, shape, dtype)
    RNG.bit_generator.state = state
    tt = tensors(torch, shape, dtype)
    kcl, tcl = channels_last(kael, kt), channels_last(torch, tt)
    for name, fn in cases.items():
        k_cl, t_cl, k_rm = fn(kael, kcl), fn(torch, tcl), fn(kael, kt)
        assert str(k_cl.dtype).split(".")[1] == str(t_cl.dtype).split(".")[1], name
        # the layout as torch's (a size-1 dim's stride moves nothing and may differ)
        assert [st for st, n in zip(k_cl.stride(), shape) if n > 1] == \
            [st for st, n in zip(t_cl.stride(), shape) if n > 1], name
        np.testing.assert_array_equal(as_numpy(k_cl), as_numpy(k_rm), err_msg=name)
        rtol = 1e-2 if dtype == "bfloat16" else 1e-6 if dtype == "float32" else 1e-14
        np.testing.assert_allclose(as_numpy(k_cl), as_numpy(t_cl), rtol=rtol, atol=rtol, err_msg=name)


@pytest.mark.parametrize("shape", SHAPES[:4], ids=str)
def test_in_place_and_out(shape):
    kt = tensors(kael, shape, "float32")
    kcl = channels_last(kael, kt)
    expected = (kt["x"] * kt["c"]).numpy()
    a = kcl["x"].clone()
    a.mul_(kcl["c"])
    np.testing.assert_array_equal(a.numpy(), expected)
    out = kael.empty(shape).contiguous(memory_format=kael.channels_last)
    kael.mul(kcl["x"], kcl["c"], out=out)
    np.testing.assert_array_equal(out.numpy(), expected)
    b = kcl["x"].clone()
    b.add_(kt["s"])
    np.testing.assert_array_equal(b.numpy(), (kt["x"] + kt["s"]).numpy())


@pytest.mark.parametrize("threads", [1, 2])
def test_threads_agree(threads):
    old = kael.get_num_threads()
    kael.set_num_threads(threads)
    try:
        kt = tensors(kael, (8, 8, 64, 64), "float32")  # large enough to split among threads
        kcl = channels_last(kael, kt)
        np.testing.assert_array_equal((kcl["x"] * kcl["c"]).numpy(), (kt["x"] * kt["c"]).numpy())
        np.testing.assert_array_equal(kael.where(kcl["m"], kcl["x"], kt["s"]).numpy(),
                                      kael.where(kt["m"], kt["x"], kt["s"]).numpy())
    finally:
        kael.set_num_threads(old)
