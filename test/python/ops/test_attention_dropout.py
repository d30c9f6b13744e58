"""scaled_dot_product_attention with dropout_p > 0 (Note [Attention dropout] in
aten/src/native/cpu/attention.cpp): the weights kept are those of a Philox stream of the default
generator, so the same seed gives the same result on 1 and 2 threads; the fraction kept is 1 - p;
the result equals torch's math (softmax, dropout with the same keep mask, matmul); dropout_p=0
draws nothing and is unchanged."""
import math

import pytest
import torch
import torch.nn.functional as TF

import kael
import kael.nn.functional as KF
from helpers import FLOAT_NAMES, check, rand_torch, to_kael, to_torch


def keep_mask(batch, L, S, p, seed):
    """The factors (0 or 1 / (1 - p)) the call after kael.manual_seed(seed) multiplies its weights
    by: with zero queries and keys every weight is 1 / S, and value = eye(S) reads them out."""
    kael.manual_seed(seed)
    q = kael.zeros(*batch, L, 4, dtype=kael.float64)
    k = kael.zeros(*batch, S, 4, dtype=kael.float64)
    v = kael.eye(S, dtype=kael.float64).expand(*batch, S, S)
    return to_torch(KF.scaled_dot_product_attention(q, k, v, dropout_p=p)).double() * S


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_fraction_kept_is_one_minus_p(p):
    m = keep_mask((2, 4), 64, 256, p, seed=1234)
    kept = (m != 0)
    # every factor is 0 or 1 / (1 - p)
    assert torch.allclose(m[kept], torch.full_like(m[kept], 1 / (1 - p)))
    n = m.numel()
    frac = kept.double().mean().item()
    sigma = math.sqrt(p * (1 - p) / n)
    assert abs(frac - (1 - p)) < 5 * sigma, (frac, 1 - p, sigma)
    # rows, columns and batches get different masks (no repeated pattern)
    assert not torch.equal(kept[0, 0, 0], kept[0, 0, 1])
    assert not torch.equal(kept[0, 0], kept[1, 3])
    assert not torch.equal(kept[..., 0], kept[..., 1])
    # per row the count of kept weights is binomial(S, 1 - p): its mean and spread
    per_row = kept.double().sum(-1).flatten()
    assert abs(per_row.mean().item() - 256 * (1 - p)) < 5 * math.sqrt(256 * p * (1 - p) / per_row.numel())
    assert 0.7 < per_row.var().item() / (256 * p * (1 - p)) < 1.3


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("shapes", [((2, 3, 10, 16), (2, 3, 10, 16), (2, 3, 10, 16)),
                                    ((1, 2, 33, 64), (1, 2, 130, 64), (1, 2, 130, 24)),
                                    ((2, 40, 20), (2, 257, 20), (2, 257, 17))], ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_equals_torch_math_with_the_same_mask(dtype, shapes, causal):
    p = 0.3
    qs, ks, vs = shapes
    q, k, v = (rand_torch(s, dtype) for s in shapes)
    kael.manual_seed(77)
    got = KF.scaled_dot_product_attention(to_kael(q), to_kael(k), to_kael(v), dropout_p=p, is_causal=causal)
    m = keep_mask(qs[:-2], qs[-2], ks[-2], p, seed=77)
    # torch's math kernel: softmax(q k^T scale (+ causal mask)), times the dropout factors, @ v
    scores = q.double() @ k.double().mT / math.sqrt(qs[-1])
    if causal:
        scores = scores.masked_fill(~torch.ones(qs[-2], ks[-2], dtype=torch.bool).tril(), -math.inf)
    expect = (torch.softmax(scores, -1) * m) @ v.double()
    tol = {"float16": 2e-3, "bfloat16": 2e-2, "float32": 2e-5, "float64": 1e-10}[dtype]
    check(got, expect.to(q.dtype), atol=tol, rtol=tol)


def test_same_seed_same_result_on_one_and_two_threads():
    q, k, v = (to_kael(rand_torch((2, 4, 70, 32))) for _ in range(3))
    before = kael.get_num_threads()
    results = []
    try:
        for n in [1, 2, 1, 2]:
            kael.set_num_threads(n)
            kael.manual_seed(5)
            results.append(KF.scaled_dot_product_attention(q, k, v, dropout_p=0.25).tolist())
    finally:
        kael.set_num_threads(before)
    assert results[0] == results[1] == results[2] == results[3]
    # the next call draws a new stream: another mask
    kael.manual_seed(5)
    first = KF.scaled_dot_product_attention(q, k, v, dropout_p=0.25).tolist()
    second = KF.scaled_dot_product_attention(q, k, v, dropout_p=0.25).tolist()
    assert first == results[0] and second != first


def test_dropout_zero_is_unchanged_and_draws_nothing():
    q, k, v = (rand_torch((2, 3, 9, 8)) for _ in range(3))
    state = kael.get_rng_state()
    got = KF.scaled_dot_product_attention(to_kael(q), to_kael(k), to_kael(v), dropout_p=0.0)
    assert torch.equal(to_torch(kael.get_rng_state()), to_torch(state))
    check(got, TF.scaled_dot_product_attention(q, k, v))
    # a bad probability draws nothing either
    with pytest.raises(RuntimeError):
        KF.scaled_dot_product_attention(to_kael(q), to_kael(k), to_kael(v), dropout_p=1.5)
    assert torch.equal(to_torch(kael.get_rng_state()), to_torch(state))


def test_dropout_one_gives_zeros_as_torch():
    q, k, v = (rand_torch((2, 5, 8)) for _ in range(3))
    check(KF.scaled_dot_product_attention(to_kael(q), to_kael(k), to_kael(v), dropout_p=1.0),
          TF.scaled_dot_product_attention(q, k, v, dropout_p=1.0))


def test_mean_over_many_draws_approaches_the_undropped_result():
    q, k, v = (rand_torch((1, 6, 8), "float64") for _ in range(3))
    kq, kk, kv = to_kael(q), to_kael(k), to_kael(v)
    kael.manual_seed(0)
    n = 2000
    total = torch.zeros(1, 6, 8, dtype=torch.float64)
    for _ in range(n):
        total += to_torch(KF.scaled_dot_product_attention(kq, kk, kv, dropout_p=0.5))
    expect = TF.scaled_dot_product_attention(q, k, v)
    # each output is a sum of 6 terms w v / (1 - p) kept with probability 1/2: its spread over n draws
    spread = (torch.softmax(q @ k.mT / math.sqrt(8), -1) ** 2 @ v ** 2).sqrt() / math.sqrt(n)
    assert ((total / n - expect).abs() <= 5 * spread + 1e-12).all()
