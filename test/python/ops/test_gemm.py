"""kael's float32 GEMM (Note [float32 GEMM] in aten/src/native/cpu/gemm.cpp), through matmul,
addmm and their gradients: every edge of its blocking (14-row and 32-column panels, 256-long
blocks of the sum, 70-row and 1024-column blocks), its packing paths (B's rows contiguous, B
transposed, other strides, a broadcast B; A's rows or columns contiguous, or neither), values
outside a view that must not leak into it, and the same bits at every thread count. Results
under 16 columns go to oneDNN (use_gemm in cpu/matmul.cpp), covered here for their values too.
Where the build has no GEMM (no AVX-512) every product runs on oneDNN and must give the same
answers, so nothing here is skipped."""
import subprocess
import sys

import numpy as np
import pytest
import torch

import kael
from helpers import run_in_threads, to_kael

# float32 against torch's float32 (MKL): the file's tolerance of test_matmul.py
RTOL, ATOL = 1e-5, 1e-4
GEMM = kael._C._gemm_f32_available()


def reference_check(result, a, b):
    """result (a kael tensor) against a float64 product of the torch operands a, b, within the
    error bound of a float32 sum of K products: K * 2^-24 * (|a| @ |b|) (plus one rounding)."""
    r = torch.from_numpy(np.array(result.numpy()))
    exact = a.double() @ b.double()
    bound = (a.shape[-1] + 1) * 2.0 ** -24 * (a.double().abs() @ b.double().abs()) + 1e-30
    assert r.shape == exact.shape and r.dtype == torch.float32
    err = (r.double() - exact).abs()
    assert bool((err <= bound).all()), f"max error {float(err.max())}, bound there {float(bound.flatten()[err.argmax()])}"
    torch.testing.assert_close(r, a @ b, rtol=RTOL, atol=ATOL)


def layouts(shape, layout, gen):
    """A torch tensor of `shape` in `layout` and the kael tensor with the same strides."""
    rows, cols = shape
    if layout == "contig":
        t = torch.randn(rows, cols, generator=gen)
        return t, to_kael(t)
    if layout == "T":  # transposed: columns contiguous
        base = torch.randn(cols, rows, generator=gen)
        return base.t(), to_kael(base).t()
    if layout == "step":  # neither stride 1
        base = torch.randn(rows * 2, cols * 3, generator=gen)
        return base[::2, ::3], to_kael(base)[::2, ::3]
    if layout == "padded":  # rows contiguous with a row stride past the width
        base = torch.randn(rows, cols + 7, generator=gen)
        return base[:, 3:cols + 3], to_kael(base)[:, 3:cols + 3]
    if layout == "expand_rows":  # every row the same (row stride 0)
        base = torch.randn(1, cols, generator=gen)
        return base.expand(rows, cols), to_kael(base).expand(rows, cols)
    if layout == "expand_cols":  # every column the same (column stride 0)
        base = torch.randn(rows, 1, generator=gen)
        return base.expand(rows, cols), to_kael(base).expand(rows, cols)
    raise ValueError(layout)


# (M, N, K): around the 14-row panel, the 70-row block, the 32-column panel, the 16-lane halves,
# the 256-long sum blocks and the 1024-column block
EDGE_SHAPES = [
    (1, 16, 1), (1, 17, 300), (13, 31, 15), (14, 32, 16), (15, 33, 17), (27, 47, 255), (28, 48, 256),
    (29, 63, 257), (69, 64, 511), (70, 65, 512), (71, 95, 513), (141, 129, 100), (5, 1025, 40),
    (3, 2100, 20), (300, 40, 260), (64, 512, 512),
]


@pytest.mark.parametrize("m,n,k", EDGE_SHAPES, ids=str)
def test_edges_of_the_blocking(m, n, k):
    gen = torch.Generator().manual_seed(m * 10007 + n * 101 + k)
    a, ka = layouts((m, k), "contig", gen)
    b, kb = layouts((k, n), "contig", gen)
    reference_check(ka @ kb, a, b)


LAYOUTS_A = ["contig", "T", "step", "padded", "expand_rows", "expand_cols"]
LAYOUTS_B = ["contig", "T", "step", "padded", "expand_rows", "expand_cols"]


@pytest.mark.parametrize("la", LAYOUTS_A)
@pytest.mark.parametrize("lb", LAYOUTS_B)
@pytest.mark.parametrize("m,n,k", [(15, 33, 17), (71, 95, 300), (20, 70, 600)], ids=str)
def test_operand_layouts(la, lb, m, n, k):
    gen = torch.Generator().manual_seed(hash((la, lb, m)) & 0xFFFF)
    a, ka = layouts((m, k), la, gen)
    b, kb = layouts((k, n), lb, gen)
    reference_check(ka @ kb, a, b)


@pytest.mark.parametrize("m,n,k", [(15, 33, 40), (75, 40, 300), (3, 17, 20)], ids=str)
def test_values_outside_a_view_do_not_leak_in(m, n, k):
    # The operands are corners of larger matrices whose other entries are NaN: the edge panels
    # read and compute lanes past the view's last row and column (masked, or zero-padded in the
    # packed copy), and none of them may reach the result.
    gen = torch.Generator().manual_seed(7)
    for b_transposed in (False, True):
        big_a = torch.full((m + 20, k + 20), float("nan"))
        big_a[:m, :k] = torch.randn(m, k, generator=gen)
        if b_transposed:
            big_b = torch.full((n + 40, k + 20), float("nan"))
            big_b[:n, :k] = torch.randn(n, k, generator=gen)
            b, kb = big_b[:n, :k].t(), to_kael(big_b)[:n, :k].t()
        else:
            big_b = torch.full((k + 20, n + 40), float("nan"))
            big_b[:k, :n] = torch.randn(k, n, generator=gen)
            b, kb = big_b[:k, :n], to_kael(big_b)[:k, :n]
        a, ka = big_a[:m, :k], to_kael(big_a)[:m, :k]
        out = ka @ kb
        assert not np.isnan(out.numpy()).any()
        reference_check(out, a, b)


def test_non_finite_values_propagate_as_in_torch():
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(30, 300, generator=gen)
    b = torch.randn(300, 50, generator=gen)
    a[2, 5] = float("inf")     # row 2: +-inf, or NaN where b's row 5 holds 0 or NaN
    a[17, 280] = float("nan")  # row 17: NaN (in the second sum block)
    b[5, 7] = 0.0              # inf * 0 = NaN at (2, 7)
    b[100, 40] = float("-inf")
    got = (to_kael(a) @ to_kael(b)).numpy()
    want = (a @ b).numpy()
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("sa,sb", [
    ((4, 30, 40), (4, 40, 33)),       # bmm, each product below the parallel size
    ((3, 1, 20, 300), (5, 300, 64)),  # broadcast batch dims
    ((2, 200, 300), (300, 100)),      # batched @ matrix
    ((100, 300), (6, 300, 40)),       # matrix @ batched
], ids=str)
def test_batched_products(sa, sb):
    gen = torch.Generator().manual_seed(11)
    a = torch.randn(*sa, generator=gen)
    b = torch.randn(*sb, generator=gen)
    got = torch.from_numpy(np.array((to_kael(a) @ to_kael(b)).numpy()))
    torch.testing.assert_close(got, a @ b, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("n,k,m", [(3, 20, 16), (70, 300, 100), (200, 513, 33)], ids=str)
def test_linear_with_bias(n, k, m):
    # linear (its weight transposed) and addmm with both layouts of mat2: the bias path starts
    # each row of the result from the bias (a GEMM with beta = 1)
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(n, k, generator=gen)
    w = torch.randn(m, k, generator=gen)
    bias = torch.randn(m, generator=gen) * 100
    got = kael.nn.functional.linear(to_kael(x), to_kael(w), to_kael(bias))
    want = torch.nn.functional.linear(x, w, bias)
    torch.testing.assert_close(torch.from_numpy(np.array(got.numpy())), want, rtol=RTOL, atol=ATOL)
    got_mm = kael.addmm(to_kael(bias), to_kael(x), to_kael(w).t())
    torch.testing.assert_close(torch.from_numpy(np.array(got_mm.numpy())), torch.addmm(bias, x, w.t()),
                               rtol=RTOL, atol=ATOL)
    # mat2 with contiguous rows: the GEMM, its rows starting from the bias
    w_rows = w.t().contiguous()
    got_rows = kael.addmm(to_kael(bias), to_kael(x), to_kael(w_rows))
    torch.testing.assert_close(torch.from_numpy(np.array(got_rows.numpy())), torch.addmm(bias, x, w_rows),
                               rtol=RTOL, atol=ATOL)


def test_gradients_through_the_gemm():
    gen = torch.Generator().manual_seed(9)
    x = torch.randn(45, 300, generator=gen, requires_grad=True)
    w = torch.randn(70, 300, generator=gen, requires_grad=True)
    bias = torch.randn(70, generator=gen, requires_grad=True)
    kx, kw, kb = (to_kael(t.detach()).requires_grad_() for t in (x, w, bias))
    dx, dw, db = (t.detach().double().requires_grad_() for t in (x, w, bias))
    torch.nn.functional.linear(x, w, bias).sin().sum().backward()
    kael.nn.functional.linear(kx, kw, kb).sin().sum().backward()
    torch.nn.functional.linear(dx, dw, db).sin().sum().backward()
    # sin of outputs up to ~50 passes on their float32 rounding: both libraries' gradients are about
    # 1e-4 off the float64 one, each by its own GEMM's order of summation (which varies with the CPU
    # torch's MKL runs on), so the float64 gradient is the oracle and kael's error must be of
    # torch's order
    for kt, t, d in ((kx, x, dx), (kw, w, dw), (kb, bias, db)):
        k_err = (torch.from_numpy(np.array(kt.grad.numpy())).double() - d.grad).abs().max().item()
        t_err = (t.grad.double() - d.grad).abs().max().item()
        assert k_err <= 4 * t_err, (k_err, t_err)


THREAD_BITS = r"""
import sys, json, hashlib
import numpy as np
import kael
kael.set_num_threads(int(sys.argv[1]))
g = np.random.default_rng(0)
out = {}
cases = {
    "columns": ((256, 300), (300, 512)),  # split into column ranges
    "rows": ((4000, 300), (300, 24)),     # too few column panels: split into row ranges
    "batches": ((120, 30, 200), (200, 40)),  # small products, split among threads by batch
    "a_transposed": ((600, 200), (200, 300)),  # x.t() @ g, as a weight's gradient is computed
    "b_transposed": ((300, 200), (200, 600)),  # x @ w.t(), as linear multiplies
}
for name, (sa, sb) in cases.items():
    a = kael.from_numpy(g.standard_normal(sa).astype(np.float32))
    b = kael.from_numpy(g.standard_normal(sb).astype(np.float32))
    if name == "a_transposed":
        a = kael.from_numpy(np.ascontiguousarray(a.numpy().T)).t()
    if name == "b_transposed":
        b = kael.from_numpy(np.ascontiguousarray(b.numpy().T)).t()
    kael._C._parallel_trace_start()
    r = a @ b
    trace = kael._C._parallel_trace_stop()
    out[name] = [hashlib.sha256(np.ascontiguousarray(r.numpy()).tobytes()).hexdigest(), trace["max_region_threads"]]
print(json.dumps(out))
"""


def test_same_bits_at_every_thread_count():
    import json
    runs = {}
    for threads in (1, 2, 3):
        proc = subprocess.run([sys.executable, "-c", THREAD_BITS, str(threads)], capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr
        runs[threads] = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in runs[1]:
        assert runs[1][name][0] == runs[2][name][0] == runs[3][name][0], name
        if GEMM:  # the products ran on the pool's threads
            assert runs[1][name][1] == 0
            assert runs[2][name][1] == 2 and runs[3][name][1] == 3, (name, runs)


def test_products_in_several_python_threads_at_once():
    # each thread packs into buffers of its own
    gen = torch.Generator().manual_seed(13)
    pairs = [(torch.randn(90 + i, 300, generator=gen), torch.randn(300, 70 + 3 * i, generator=gen)) for i in range(4)]
    want = [a @ b for a, b in pairs]

    def work(i):
        ka, kb = to_kael(pairs[i][0]), to_kael(pairs[i][1])
        for _ in range(20):
            got = torch.from_numpy(np.array((ka @ kb).numpy()))
            torch.testing.assert_close(got, want[i], rtol=RTOL, atol=ATOL)

    run_in_threads(work, range(4))


def test_narrow_results_and_float64_take_the_other_paths():
    # fewer than 16 columns (oneDNN) and float64 (kael's loop) give torch's values as before
    gen = torch.Generator().manual_seed(17)
    a = torch.randn(100, 300, generator=gen)
    b = torch.randn(300, 15, generator=gen)
    torch.testing.assert_close(torch.from_numpy(np.array((to_kael(a) @ to_kael(b)).numpy())), a @ b,
                               rtol=RTOL, atol=ATOL)
    a64, b64 = a.double(), torch.randn(300, 40, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(torch.from_numpy(np.array((to_kael(a64) @ to_kael(b64)).numpy())), a64 @ b64)
