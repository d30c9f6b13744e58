"""scaled_dot_product_attention against PyTorch: shapes, broadcasting, masks, is_causal, scale,
dtypes, non-contiguous inputs, long sequences, bad input, and memory that stays bounded (the
kernel never stores the (L, S) attention matrix)."""
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as TF

import kael
import kael.nn.functional as KF
from helpers import FLOAT_NAMES, LAYOUTS, check, compare, make_pair, rand_torch, tdtype, to_kael


def sdpa(lib):
    return lib.nn.functional.scaled_dot_product_attention


def exact(q, k, v, **kw):
    """torch's result computed in float64, rounded to q's dtype (the exact result)."""
    m = kw.get("attn_mask")
    if m is not None and m.dtype != torch.bool:
        kw = dict(kw, attn_mask=m.double())
    return TF.scaled_dot_product_attention(q.double(), k.double(), v.double(), **kw).to(q.dtype)


def ref(q, k, v, **kw):
    """torch's result; for float16/bfloat16 computed in float32 and rounded once.

    kael computes the half types in float32 and rounds once. torch's CPU kernel for them rounds
    intermediate results (relative errors up to 50% for bfloat16 on outputs near 0 with 64-dim
    heads); float32 and float64 compare with torch as is.
    """
    if q.dtype in (torch.float16, torch.bfloat16):
        m = kw.get("attn_mask")
        if m is not None and m.dtype != torch.bool:
            kw = dict(kw, attn_mask=m.float())
        return TF.scaled_dot_product_attention(q.float(), k.float(), v.float(), **kw).to(q.dtype)
    return TF.scaled_dot_product_attention(q, k, v, **kw)


def run(q, k, v, **kw):
    kkw = {key: (to_kael(val) if isinstance(val, torch.Tensor) else val) for key, val in kw.items()}
    return KF.scaled_dot_product_attention(to_kael(q), to_kael(k), to_kael(v), **kkw)


SHAPES = [  # (q, k, v)
    ((4, 8), (6, 8), (6, 8)),
    ((2, 5, 8), (2, 7, 8), (2, 7, 3)),
    ((2, 3, 10, 16), (2, 3, 10, 16), (2, 3, 10, 16)),
    ((1, 2, 33, 64), (1, 2, 130, 64), (1, 2, 130, 64)),  # edges of the 32 x 128 blocks
    ((2, 1, 5, 4), (1, 3, 6, 4), (2, 3, 6, 5)),  # broadcast batch dims
    ((3, 1, 8), (3, 1, 8), (3, 1, 8)),
    ((2, 40, 20), (2, 257, 20), (2, 257, 17)),
    ((1, 2, 37, 24), (1, 2, 150, 24), (1, 2, 150, 48)),  # value columns in 32s and then 16s
]


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("shapes", SHAPES)
def test_sdpa_matches_torch(dtype, shapes):
    qs, ks, vs = shapes
    q, k, v = (rand_torch(s, dtype) for s in shapes)
    check(run(q, k, v), ref(q, k, v))
    check(run(q, k, v, scale=0.3), ref(q, k, v, scale=0.3))
    L, S = qs[-2], ks[-2]
    check(run(q, k, v, is_causal=True), ref(q, k, v, is_causal=True))
    bool_mask = torch.rand(L, S) > 0.3
    bool_mask[:, 0] = True  # no row fully masked here (see test_sdpa_fully_masked_rows)
    check(run(q, k, v, attn_mask=bool_mask), ref(q, k, v, attn_mask=bool_mask))
    float_mask = rand_torch((L, S), dtype)
    check(run(q, k, v, attn_mask=float_mask), ref(q, k, v, attn_mask=float_mask))
    if dtype in ("float32", "float64"):  # the torch call spelled out once
        check(run(q, k, v), TF.scaled_dot_product_attention(q, k, v))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_sdpa_non_contiguous(layout):
    shape = (3, 20, 16)
    q, k, v = (make_pair(shape, "float32", layout) for _ in range(3))
    check(KF.scaled_dot_product_attention(q.k, k.k, v.k), TF.scaled_dot_product_attention(q.t, k.t, v.t))
    m = make_pair((20, 20), "float32", layout)
    check(KF.scaled_dot_product_attention(q.k, k.k, v.k, attn_mask=m.k),
          TF.scaled_dot_product_attention(q.t, k.t, v.t, attn_mask=m.t))


def test_sdpa_mask_broadcasting():
    q, k, v = (rand_torch((2, 3, 9, 8)) for _ in range(3))
    for mshape in [(9, 9), (1, 9), (9, 1), (3, 9, 9), (2, 1, 9, 9), (2, 3, 9, 9), (1, 1, 1, 9)]:
        for dtype in ["bool", "float32"]:
            m = torch.rand(mshape) > 0.2 if dtype == "bool" else rand_torch(mshape)
            if dtype == "bool":
                m[..., 0] = True
            check(run(q, k, v, attn_mask=m), TF.scaled_dot_product_attention(q, k, v, attn_mask=m))


def test_sdpa_causal_rectangular():
    for L, S in [(5, 9), (9, 5), (1, 40), (200, 300), (300, 200)]:
        q, k, v = rand_torch((2, L, 16)), rand_torch((2, S, 16)), rand_torch((2, S, 8))
        check(run(q, k, v, is_causal=True), TF.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_sdpa_fully_masked_rows():
    # a query row with every key masked: torch's CPU result, compared as is (NaN positions too)
    q, k, v = (rand_torch((1, 4, 8)) for _ in range(3))
    m = torch.ones(4, 4, dtype=torch.bool)
    m[2] = False
    check(run(q, k, v, attn_mask=m), TF.scaled_dot_product_attention(q, k, v, attn_mask=m))
    fm = torch.zeros(4, 4)
    fm[1] = float("-inf")
    check(run(q, k, v, attn_mask=fm), TF.scaled_dot_product_attention(q, k, v, attn_mask=fm))


def test_sdpa_empty():
    for qs, ks in [((0, 4, 8), (0, 4, 8)), ((2, 0, 8), (2, 4, 8)), ((2, 3, 0), (2, 4, 0)), ((2, 3, 8), (2, 0, 8))]:
        vs = ks[:-1] + (5,)
        compare(lambda lib, q, k, v: sdpa(lib)(q, k, v), (qs, "float32"), (ks, "float32"), (vs, "float32"))
        compare(lambda lib, q, k, v: sdpa(lib)(q, k, v, scale=0.5), (qs, "float32"), (ks, "float32"),
                (vs, "float32"))
    # no embedding dims (every score 0) with a mask: the mean of the kept values
    m = torch.tensor([[True, False, True, True]] * 3)
    q, k, v = torch.randn(2, 3, 0), torch.randn(2, 4, 0), torch.randn(2, 4, 5)
    check(run(q, k, v, attn_mask=m), TF.scaled_dot_product_attention(q, k, v, attn_mask=m))


def unit(shape):
    # N(0, 1) values, as attention inputs usually are: with rand_torch's N(0, 4), 64-dim scores
    # spread so far that torch's own float32 kernel comes within 0.9x of the float32 tolerance
    # against the float64 result.
    return rand_torch(shape) / 2


def test_sdpa_long_sequences_against_float64():
    # long enough for many key blocks per query block; float32 checked against the exact result
    for L, S, causal in [(2048, 2048, False), (2048, 2048, True), (1500, 3000, False)]:
        q, k, v = unit((2, L, 32)), unit((2, S, 32)), unit((2, S, 32))
        check(run(q, k, v, is_causal=causal), exact(q, k, v, is_causal=causal))
        check(run(q, k, v, is_causal=causal), TF.scaled_dot_product_attention(q, k, v, is_causal=causal))
    q, k, v = (unit((1, 2, 1024, 64)) for _ in range(3))
    m = torch.rand(1024, 1024) > 0.5
    m[:, 0] = True
    check(run(q, k, v, attn_mask=m), exact(q, k, v, attn_mask=m))


def test_sdpa_threads_give_the_same_result():
    q, k, v = (rand_torch((2, 4, 300, 32)) for _ in range(3))
    before = kael.get_num_threads()
    try:
        kael.set_num_threads(1)
        one = run(q, k, v, is_causal=True).tolist()
        kael.set_num_threads(2)
        two = run(q, k, v, is_causal=True)
    finally:
        kael.set_num_threads(before)
    assert one == two.tolist()
    check(two, TF.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_sdpa_memory_stays_bounded():
    # 8192 x 8192 attention: the matrix alone would be 256 MiB of float32. The process's peak
    # resident memory may grow by far less (inputs and output are 1 MiB each).
    code = textwrap.dedent("""
        import resource, kael
        import kael.nn.functional as F
        L, E = 8192, 16
        q, k, v = (kael.ones(1, L, E) for _ in range(3))
        kael.softmax(kael.ones(4, 4), 0)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        assert out.shape == (1, L, E)
        print((after - before) * 1024)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    grown = int(r.stdout.strip())
    assert grown < 32 * 2**20, f"peak resident memory grew by {grown} bytes"
    # and through kael's allocator: nothing near L * S elements is reserved
    q, k, v = (kael.ones(1, 4096, 16) for _ in range(3))
    kael.empty_cache()
    reserved = kael.allocator_stats()["reserved_bytes"]
    out = KF.scaled_dot_product_attention(q, k, v)
    assert kael.allocator_stats()["reserved_bytes"] - reserved < 4096 * 4096 * 4 // 16
    assert out.shape == (1, 4096, 16)


def test_sdpa_bad_input():
    f = lambda lib, q, k, v: sdpa(lib)(q, k, v)  # noqa: E731
    compare(f, ((2, 4, 8), "float32"), ((2, 5, 7), "float32"), ((2, 5, 8), "float32"))  # E mismatch
    compare(f, ((2, 4, 8), "float32"), ((2, 5, 8), "float32"), ((2, 6, 8), "float32"))  # S mismatch
    compare(f, ((2, 4, 8), "float32"), ((2, 5, 8), "float64"), ((2, 5, 8), "float32"))  # dtypes
    compare(f, ((3, 4, 8), "float32"), ((2, 5, 8), "float32"), ((2, 5, 8), "float32"))  # batch
    compare(f, ((2, 4, 8), "int64"), ((2, 5, 8), "int64"), ((2, 5, 8), "int64"))
    g = lambda lib, q, k, v, m: sdpa(lib)(q, k, v, attn_mask=m)  # noqa: E731
    compare(g, ((2, 4, 8), "float32"), ((2, 5, 8), "float32"), ((2, 5, 8), "float32"), ((4, 4), "float32"))
    compare(g, ((2, 4, 8), "float32"), ((2, 5, 8), "float32"), ((2, 5, 8), "float32"), ((4, 5), "int64"))
    q, k, v = (rand_torch((2, 4, 8)) for _ in range(3))
    m = torch.ones(4, 4, dtype=torch.bool)
    with pytest.raises(RuntimeError):
        TF.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=True)
    with pytest.raises(RuntimeError, match="scaled_dot_product_attention: Explicit attn_mask"):
        run(q, k, v, attn_mask=m, is_causal=True)
    with pytest.raises(RuntimeError, match="dropout probability has to be between 0 and 1"):
        TF.scaled_dot_product_attention(q, k, v, dropout_p=1.5)
    with pytest.raises(RuntimeError, match="scaled_dot_product_attention: dropout probability has to be between 0 "
                                           "and 1, but got 1.5"):
        run(q, k, v, dropout_p=1.5)
    # torch drops only with a positive dropout_p: a negative one (or NaN) computes without dropout
    for p in [-0.1, float("nan")]:
        check(run(q, k, v, dropout_p=p), TF.scaled_dot_product_attention(q, k, v, dropout_p=p))


_NAN = float("nan")


@pytest.mark.parametrize("case", ["nan query row", "nan mask row", "nan key", "nan mask entry", "nan value",
                                  "long nan row"])
def test_sdpa_nan_scores_give_nan_rows_not_masked_zeros(case):
    # a row whose scores are all NaN is NaN in torch, not the 0 of a fully masked row; gradients too
    g = torch.Generator().manual_seed(0)
    L, S, E = (3, 3, 2) if case != "long nan row" else (40, 300, 8)  # past one block of keys
    q, k, v = (torch.randn(n, E, generator=g) for n in (L, S, S))
    mask = None
    if case in ("nan query row", "long nan row"):
        q[1, 0] = _NAN
    elif case == "nan mask row":
        mask = torch.zeros(L, S)
        mask[1] = _NAN
    elif case == "nan key":
        k[S - 1, 1] = _NAN
    elif case == "nan mask entry":
        mask = torch.zeros(L, S)
        mask[0, 1] = _NAN
    else:
        v[0, 0] = _NAN
    results = []
    for lib, F in ((torch, TF), (kael, KF)):
        leaves = [lib.tensor(t.tolist(), requires_grad=True) for t in (q, k, v)]
        o = F.scaled_dot_product_attention(*leaves, attn_mask=None if mask is None else lib.tensor(mask.tolist()))
        o.sum().backward()
        results.append([torch.tensor(o.tolist())] + [torch.tensor(t.grad.tolist()) for t in leaves])
    for want, got in zip(*results):
        assert torch.equal(want.isnan(), got.isnan())
        torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape_q,shape_kv", [((2, 8, 5, 16), (2, 2, 7, 16)), ((4, 3, 8), (1, 3, 8)),
                                              ((1, 6, 4, 8), (1, 3, 4, 8)), ((2, 4, 5, 8), (2, 4, 5, 8))])
@pytest.mark.parametrize("is_causal", [False, True])
def test_grouped_query_attention_matches_torch(shape_q, shape_kv, is_causal):
    torch.manual_seed(0)
    tq = torch.randn(shape_q, requires_grad=True)
    tk = torch.randn(shape_kv, requires_grad=True)
    tv = torch.randn(shape_kv, requires_grad=True)
    kq, kk, kv = (to_kael(t.detach()).requires_grad_(True) for t in (tq, tk, tv))
    want = TF.scaled_dot_product_attention(tq, tk, tv, is_causal=is_causal, enable_gqa=True)
    got = KF.scaled_dot_product_attention(kq, kk, kv, is_causal=is_causal, enable_gqa=True)
    check(got, want.detach())
    g = torch.randn(want.shape)
    want.backward(g)
    got.backward(to_kael(g))
    for k_, t_ in ((kq, tq), (kk, tk), (kv, tv)):
        check(k_.grad, t_.grad)


def test_grouped_query_attention_needs_a_divisor_of_the_heads():
    q, k = torch.randn(1, 4, 3, 8), torch.randn(1, 3, 3, 8)
    with pytest.raises(RuntimeError, match="Number of heads in key and value must divide"):
        TF.scaled_dot_product_attention(q, k, k, enable_gqa=True)
    with pytest.raises(RuntimeError, match=r"heads in key \(3\) and value \(3\) must divide the number of heads in query \(4\)"):
        KF.scaled_dot_product_attention(to_kael(q), to_kael(k), to_kael(k), enable_gqa=True)
    # without enable_gqa the head counts must broadcast, in both libraries
    k2 = torch.randn(1, 2, 3, 8)
    with pytest.raises(RuntimeError):
        TF.scaled_dot_product_attention(q, k2, k2)
    with pytest.raises(RuntimeError, match="not broadcastable"):
        KF.scaled_dot_product_attention(to_kael(q), to_kael(k2), to_kael(k2))
