"""Generation with kael's KV-cache decoder (kael.GPT.generate, kael._C._gpt_generate and
kael._C._GptDecoder; Note [Decoder] in libs/gpt/include/kael/gpt/gpt.h) against Hugging Face's
GPT2LMHeadModel: greedy tokens as transformers' generate, the cache against a full recompute per
step, batching, seeds and threads, the sampling distribution, the GIL, the callback, stop tokens,
cropping past block_size, every invalid input, and the step API for a server. Small randomly
initialised models; nothing is downloaded."""
import math
import sys
import threading

import numpy as np
import pytest
import torch

import kael
from kael import _C
from helpers import to_kael
from hf_gpt2 import spread_weights

import transformers  # noqa: E402

V = 97
SIZES = dict(vocab_size=V, block_size=64, n_layer=2, n_head=4, n_embd=32)


def hf_model(**overrides):
    """A randomly initialised float32 GPT2LMHeadModel, weights far from the initialisation (as in
    test_gpt.py) so that the logits are spread and greedy ties are rare."""
    sizes = dict(SIZES, **overrides)
    config = transformers.GPT2Config(vocab_size=sizes["vocab_size"], n_positions=sizes["block_size"],
                                     n_embd=sizes["n_embd"], n_layer=sizes["n_layer"], n_head=sizes["n_head"],
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(1)
    return spread_weights(transformers.GPT2LMHeadModel(config).float().eval())


def kael_copy(hf, **overrides):
    model = kael.GPT(kael.GPTConfig(**dict(SIZES, **overrides)))
    model.load_state_dict({k: to_kael(v) for k, v in hf.state_dict().items()})
    return model.eval()


@pytest.fixture(scope="module")
def hf():
    return hf_model()


@pytest.fixture(scope="module")
def model(hf):
    return kael_copy(hf)


def prompts(b, t, seed=0, high=V):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, high, (b, t), generator=g)


def ragged(lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, V, (n,), generator=g).tolist() for n in lengths]


def generate(model, idx, max_new_tokens, **kw):
    return model.generate(idx, max_new_tokens, **kw)


def recompute_greedy(model, row, n, block):
    """Greedy tokens from the full forward (engineer A's _gpt_forward) of the last `block` tokens
    of the context at every step: nanoGPT's generate without a cache."""
    ctx = list(row)
    with kael.no_grad():
        for _ in range(n):
            logits = model(kael.tensor([ctx[-block:]], dtype=kael.int64))
            ctx.append(int(logits[0, -1].argmax().item()))
    return ctx[len(row):]


# ---------------------------------------------------------------- greedy oracles


def test_greedy_matches_transformers_generate(hf, model):
    idx = prompts(3, 8)
    expected = hf.generate(idx, attention_mask=torch.ones_like(idx), do_sample=False, max_new_tokens=50,
                           pad_token_id=0)
    got = generate(model, to_kael(idx), 50, temperature=0)
    assert got.dtype == kael.int64 and tuple(got.shape) == (3, 58)
    assert got.tolist() == expected.tolist()


def test_kv_cache_matches_full_recompute(model):
    rows = ragged([5, 1, 12])
    got = generate(model, rows, 40, temperature=0)
    for row, new in zip(rows, got):
        assert new == recompute_greedy(model, row, 40, SIZES["block_size"])


def test_context_longer_than_block_size_is_cropped():
    hf = hf_model(block_size=16)
    model = kael_copy(hf, block_size=16)
    rows = [prompts(1, 20, seed=3)[0].tolist(), [5, 6, 7]]  # one prompt longer than the block, one reaching it
    got = generate(model, rows, 25, temperature=0)
    for row, new in zip(rows, got):
        assert new == recompute_greedy(model, row, 25, 16)
    # the tensor form crops the same way
    idx = torch.tensor([rows[0]])
    assert generate(model, to_kael(idx), 25, temperature=0)[0, 20:].tolist() == got[0]


def test_long_prompts_are_prefilled_in_chunks():
    """A prompt longer than the decoder's chunk (256 rows) is prefilled in several forward
    passes, each attending to the cache the earlier ones wrote."""
    hf = hf_model(block_size=600)
    model = kael_copy(hf, block_size=600)
    rows = [prompts(1, 520, seed=5)[0].tolist(), [3, 1, 4]]
    got = generate(model, rows, 6, temperature=0)
    for row, new in zip(rows, got):
        assert new == recompute_greedy(model, row, 6, 600)
    idx = torch.tensor(rows[:1])
    expected = hf.generate(idx, attention_mask=torch.ones_like(idx), do_sample=False, max_new_tokens=6, pad_token_id=0)
    assert got[0] == expected[0, 520:].tolist()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_weights_compute_as_their_float32_values(hf, dtype):
    """The decoder widens bfloat16 and float16 weights exactly and sums in float32: the same
    tokens as float32 weights holding the same values."""
    model16 = kael_copy(hf).to(getattr(kael, dtype))
    model32 = kael_copy(hf).to(getattr(kael, dtype)).to(kael.float32)
    rows = ragged([4, 9])
    assert generate(model16, rows, 30, temperature=0) == generate(model32, rows, 30, temperature=0)
    sampled = dict(temperature=0.9, top_k=30, seed=4)
    assert generate(model16, rows, 30, **sampled) == generate(model32, rows, 30, **sampled)


# ---------------------------------------------------------------- batching, seeds, threads


@pytest.mark.parametrize("settings", [dict(temperature=0), dict(temperature=0.8, top_k=20, top_p=0.9, seed=5),
                                      dict(temperature=1.3, seed=11)])
def test_ragged_batch_matches_one_prompt_at_a_time(model, settings):
    rows = ragged([3, 9, 1, 14, 6])
    batched = generate(model, rows, 20, **settings)
    assert [len(r) for r in batched] == [20] * 5
    for r, row in enumerate(rows):
        # alone, on the stream of its row (seed, r)
        decoder = _C._GptDecoder(model._config_tuple, model._parameters_in_order(), 1)
        decoder.add(row, settings["temperature"], settings.get("top_k"), settings.get("top_p"),
                    settings.get("seed", 0), None, 20, r)
        alone = []
        while decoder.active:
            alone += [token for _, token, _ in decoder.step()]
        assert alone == batched[r]
    # row 0 alone through generate (stream 0)
    assert generate(model, rows[:1], 20, **settings) == batched[:1]
    # a tensor of equal-length prompts gives the list form's tokens
    idx = prompts(2, 7)
    as_tensor = generate(model, to_kael(idx), 20, **settings)
    assert as_tensor[:, 7:].tolist() == generate(model, idx.tolist(), 20, **settings)


def test_seed_alone_decides_the_tokens(model):
    rows = ragged([4, 7])
    kw = dict(temperature=1.0, top_p=0.95, seed=1234)
    kael.manual_seed(0)
    first = generate(model, rows, 30, **kw)
    kael.manual_seed(99)
    kael.rand(5)
    assert generate(model, rows, 30, **kw) == first
    assert generate(model, rows, 30, **dict(kw, seed=1235)) != first
    # seed=None draws one seed from kael's generator: manual_seed makes it reproducible
    kael.manual_seed(7)
    a = generate(model, rows, 30, temperature=1.0)
    kael.manual_seed(7)
    assert generate(model, rows, 30, temperature=1.0) == a


def test_tokens_do_not_depend_on_the_thread_count(model):
    rows = ragged([2, 11, 5])
    before = kael.get_num_threads()
    try:
        results = []
        for n in (1, 2):
            kael.set_num_threads(n)
            results.append((generate(model, rows, 25, temperature=0),
                            generate(model, rows, 25, temperature=0.9, top_k=40, seed=3)))
        assert results[0] == results[1]
    finally:
        kael.set_num_threads(before)


def test_top_k_one_is_greedy(model):
    rows = ragged([6, 2])
    assert generate(model, rows, 25, temperature=1.5, top_k=1, seed=8) == generate(model, rows, 25, temperature=0)


def test_temperature_top_k_and_top_p_distributions():
    """Many rows of one prompt, one token each: each row draws from its own stream, so the
    tokens are independent draws from the last position's distribution."""
    hf = hf_model(vocab_size=6)
    model = kael_copy(hf, vocab_size=6)
    prompt = [1, 4, 2]
    with torch.no_grad():
        logits = hf(torch.tensor([prompt])).logits[0, -1].double()
    n = 4000

    def frequencies(**kw):
        got = generate(model, [prompt] * n, 1, seed=21, **kw)
        return np.bincount([r[0] for r in got], minlength=6) / n

    def check(freq, probs):
        sigma = np.sqrt(probs * (1 - probs) / n)
        assert np.all(np.abs(freq - probs) <= 5 * sigma + 1e-12), (freq, probs)

    t = 0.7
    check(frequencies(temperature=t), torch.softmax(logits / t, 0).numpy())
    order = torch.argsort(logits, descending=True)
    top2 = torch.full_like(logits, -math.inf)
    top2[order[:2]] = logits[order[:2]]
    freq = frequencies(temperature=1.0, top_k=2)
    assert set(np.nonzero(freq)[0]) <= set(order[:2].tolist())
    check(freq, torch.softmax(top2, 0).numpy())
    # top_p: the smallest set of the likeliest tokens whose probability reaches p
    probs = torch.softmax(logits, 0)
    cum = torch.cumsum(probs[order], 0)
    p = float((cum[1] + cum[2]) / 2)  # the nucleus is the top 3
    nucleus = torch.full_like(logits, -math.inf)
    nucleus[order[:3]] = logits[order[:3]]
    freq = frequencies(temperature=1.0, top_p=p)
    assert set(np.nonzero(freq)[0]) <= set(order[:3].tolist())
    check(freq, torch.softmax(nucleus, 0).numpy())


# ---------------------------------------------------------------- the GIL and the callback


def test_the_gil_is_free_while_generate_runs(model):
    """With a switch interval far longer than the test, the interpreter never hands the GIL to
    another thread by itself: the other thread, woken by the first on_token, can only run when
    generate releases the GIL in its steps. on_token stops generation once it sees the other
    thread's progress; without a release that never happens, and all 3000 steps run."""
    started, progressed = threading.Event(), threading.Event()
    seen = []

    def other():
        started.wait()
        progressed.set()

    def on_token(tokens):
        started.set()  # does not release the GIL: nobody holds the event's lock
        seen.append(progressed.is_set())
        return False if seen[-1] else None

    thread = threading.Thread(target=other)
    thread.start()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        # past block_size every step recomputes a 64-token window: steps long enough to hand over
        generate(model, ragged([5]), 3000, temperature=0, on_token=on_token)
    finally:
        sys.setswitchinterval(interval)
        started.set()
        thread.join()
    assert seen[0] is False and seen[-1] is True and len(seen) < 3000


def test_on_token_none_false_and_exceptions(model):
    idx = to_kael(prompts(2, 4))
    calls = []

    def record(tokens):
        assert tokens.dtype == kael.int64 and tuple(tokens.shape) == (2,)
        calls.append(tokens.tolist())

    full = generate(model, idx, 6, temperature=0, on_token=record)
    assert len(calls) == 6 and [c for step in calls for c in step] == full[:, 4:].t().reshape(-1).tolist()

    stop_after = []

    def stop(tokens):
        stop_after.append(1)
        return False if len(stop_after) == 3 else None

    got = generate(model, idx, 6, temperature=0, on_token=stop)
    assert tuple(got.shape) == (2, 7) and got.tolist() == full[:, :7].tolist()

    error = RuntimeError("stop here")

    def boom(tokens):
        raise error

    with pytest.raises(RuntimeError) as info:
        generate(model, idx, 6, temperature=0, on_token=boom)
    assert info.value is error


def test_on_token_may_change_the_prompts_and_parameters(model, hf):
    rows = ragged([4, 6])
    expected = generate(model, [list(r) for r in rows], 8, temperature=0)
    mine = kael_copy(hf)
    params = mine._parameters_in_order()
    held = [list(r) for r in rows]

    def meddle(tokens):
        held[0].clear()
        held.append([1])
        for p in params:
            p.data = kael.zeros(1)  # the decoder keeps its own views of the old memory
    assert _C._gpt_generate(mine._config_tuple, params, held, 8, 0.0, None, None, None, meddle, None) == expected


def test_stop_tokens_end_a_row(model):
    idx = prompts(2, 5)
    full = generate(model, to_kael(idx), 12, temperature=0)
    stop = full[0, 5 + 3].item()  # row 0's fourth new token
    first = full[0, 5:].tolist().index(stop)
    got = generate(model, to_kael(idx), 12, temperature=0, stop_tokens=[stop])
    row0 = got[0, 5:].tolist()
    assert row0[:first + 1] == full[0, 5:5 + first + 1].tolist()
    assert all(t == stop for t in row0[first:])  # padded with the stop token
    rows = generate(model, idx.tolist(), 12, temperature=0, stop_tokens={stop})
    assert rows[0] == full[0, 5:5 + first + 1].tolist()
    # every row stopped: the tensor is as long as the longest row
    both = generate(model, to_kael(idx), 12, temperature=0, stop_tokens=(stop, full[1, 5].item()))
    assert both.shape[1] == 5 + first + 1


def test_zero_new_tokens(model):
    idx = prompts(2, 3)
    assert generate(model, to_kael(idx), 0, temperature=0).tolist() == idx.tolist()
    assert generate(model, [[1], [2, 3]], 0) == [[], []]


# ---------------------------------------------------------------- invalid inputs


@pytest.mark.parametrize("change, error, message", [
    (dict(prompts=[[1, V]]), ValueError, str(V)),
    (dict(prompts=[[-1]]), ValueError, "-1"),
    (dict(prompts=[[1], []]), ValueError, "empty"),
    (dict(prompts=[]), ValueError, "at least one row"),
    (dict(prompts=[[1, 2.0]]), TypeError, "float"),
    (dict(prompts=[[1, True]]), TypeError, "bool"),
    (dict(prompts=[[1, "2"]]), TypeError, "str"),
    (dict(prompts=[3]), TypeError, "int"),
    (dict(prompts="ab"), TypeError, "str"),
    (dict(prompts=kael.zeros(1, 3)), TypeError, "float32"),
    (dict(prompts=kael.zeros(1, 0, dtype=kael.int64)), ValueError, "1x0"),
    (dict(prompts=kael.full((1, 2), V, dtype=kael.int64)), ValueError, str(V)),
    (dict(temperature=-0.5), ValueError, "-0.5"),
    (dict(temperature=float("nan")), ValueError, "nan"),
    (dict(temperature="1"), TypeError, "str"),
    (dict(top_k=0), ValueError, "0"),
    (dict(top_k=2.5), TypeError, "float"),
    (dict(top_p=0.0), ValueError, "0"),
    (dict(top_p=1.5), ValueError, "1.5"),
    (dict(max_new_tokens=-1), ValueError, "-1"),
    (dict(max_new_tokens=2.0), TypeError, "float"),
    (dict(seed=-3), ValueError, "-3"),
    (dict(seed="x"), TypeError, "str"),
    (dict(on_token=5), TypeError, "int"),
    (dict(stop_tokens=[V + 1]), ValueError, str(V + 1)),
    (dict(stop_tokens=["a"]), TypeError, "str"),
    (dict(stop_tokens=7), TypeError, "int"),
])
def test_invalid_inputs(model, change, error, message):
    args = dict(prompts=[[1, 2]], max_new_tokens=3, temperature=1.0, top_k=None, top_p=None, seed=0, on_token=None,
                stop_tokens=None)
    args.update(change)
    state = kael.get_rng_state()
    with pytest.raises(error, match="generate") as info:
        _C._gpt_generate(model._config_tuple, model._parameters_in_order(), args["prompts"], args["max_new_tokens"],
                         args["temperature"], args["top_k"], args["top_p"], args["seed"], args["on_token"],
                         args["stop_tokens"])
    assert message in str(info.value)
    assert kael.get_rng_state().tolist() == state.tolist()  # nothing drawn before the checks


def test_invalid_config_and_params(model):
    params = model._parameters_in_order()
    state = kael.get_rng_state()
    with pytest.raises(ValueError, match="parameters"):  # checked before seed=None draws a seed
        _C._gpt_generate(model._config_tuple, params[:-1], [[1]], 1, 1.0, None, None, None, None, None)
    assert kael.get_rng_state().tolist() == state.tolist()
    with pytest.raises(TypeError):
        _C._gpt_generate((1, 2), params, [[1]], 1, 0.0, None, None, 0, None, None)
    with pytest.raises(ValueError, match="parameters"):
        _C._gpt_generate(model._config_tuple, params[:-1], [[1]], 1, 0.0, None, None, 0, None, None)
    with pytest.raises(TypeError, match="params"):
        _C._gpt_generate(model._config_tuple, params[:-1] + [3], [[1]], 1, 0.0, None, None, 0, None, None)


# ---------------------------------------------------------------- the step API


def test_decoder_add_step_remove(model):
    decoder = _C._GptDecoder(model._config_tuple, model._parameters_in_order(), 2)
    assert decoder.max_batch == 2 and decoder.active == 0
    assert decoder.step() == []
    rows = ragged([3, 8])
    a = decoder.add(rows[0], 0.0, None, None, 0, None, 5)
    b = decoder.add(rows[1], 0.0, None, None, 0, None, 3)
    assert {a, b} == {0, 1} and decoder.active == 2
    with pytest.raises(ValueError, match="free slot"):
        decoder.add([1], 0.0, None, None, 0, None, 1)
    got = {a: [], b: []}
    finished = []
    while decoder.active:
        for slot, token, done in decoder.step():
            got[slot].append(token)
            if done:
                finished.append(slot)
    assert finished == [b, a]
    expected = generate(model, rows, 5, temperature=0)
    assert got[a] == expected[0] and got[b] == expected[1][:3]
    # a slot is reused; a removed sequence yields nothing more
    c = decoder.add(rows[1], 0.0, None, None, 0, None, 4)
    d = decoder.add(rows[0], 0.0, None, None, 0, None, 4)
    decoder.step()
    decoder.remove(c)
    with pytest.raises(ValueError, match="slot"):
        decoder.remove(c)
    events = decoder.step()
    assert [e[0] for e in events] == [d] and decoder.active == 1
    # max_new_tokens=0 finishes at the next step without a token
    e = decoder.add([4], 0.0, None, None, 0, None, 0)
    assert (e, -1, True) in decoder.step()
    with pytest.raises(ValueError, match="-2"):
        decoder.add([1], 0.0, None, None, 0, None, -2)
    with pytest.raises(ValueError, match=str(V)):
        decoder.add([V], 0.0, None, None, 0, None, 1)
    with pytest.raises(ValueError, match="max_batch"):
        _C._GptDecoder(model._config_tuple, model._parameters_in_order(), 0)


def test_decoder_step_budget_interleaves_prefill_with_decoding(model):
    """step(max_rows): every decoding sequence draws a token at each step while new prompts are
    prefilled oldest first within the rest of the budget (Note [Prefill budget]); each
    sequence's tokens are those it gets alone, whatever the chunking of its prompt."""
    settings = dict(temperature=0.9, top_k=40, seed=21)
    rows = ragged([5, 40, 10], seed=3)
    decoder = _C._GptDecoder(model._config_tuple, model._parameters_in_order(), 3)
    a = decoder.add(rows[0], 0.9, 40, None, 21, None, 30, 0)
    # 5 prompt tokens in budgets of 4: no token at the first step, the first at the second
    assert decoder.step(4) == []
    events = decoder.step(4)
    assert [(slot, done) for slot, _, done in events] == [(a, False)]
    got = {a: [events[0][1]]}
    b = decoder.add(rows[1], 0.9, 40, None, 21, None, 6, 1)
    c = decoder.add(rows[2], 0.9, 40, None, 21, None, 6, 2)
    got[b], got[c] = [], []
    first = {}
    for step in range(1, 100):
        events = decoder.step(8)
        slots = [slot for slot, _, _ in events]
        if a in got and len(got[a]) < 30:
            assert a in slots, f"the running sequence got no token at step {step}"
        for slot, token, _ in events:
            got[slot].append(token)
            first.setdefault(slot, step)
        if not decoder.active:
            break
    # b's 40 rows take 7 a step (1 row goes to a): its first token at step 6; c waits for b
    # (oldest first), then takes what is left: 2 rows at step 6, 6 at step 7 (a and b decode),
    # its last 2 at step 8
    assert first[b] == 6 and first[c] == 8
    expected = generate(model, rows, 30, **settings)
    assert got[a] == expected[0]
    assert got[b] == expected[1][:6] and got[c] == expected[2][:6]


def test_decoder_step_budget_of_one_row_still_progresses(model):
    rows = ragged([2, 6])
    decoder = _C._GptDecoder(model._config_tuple, model._parameters_in_order(), 2)
    decoder.add(rows[0], 0.0, None, None, 0, None, 12)
    decoder.add(rows[1], 0.0, None, None, 0, None, 4)
    got = {0: [], 1: []}
    for _ in range(40):
        for slot, token, _ in decoder.step(1):
            got[slot].append(token)
        if not decoder.active:
            break
    assert decoder.active == 0
    expected = generate(model, rows, 12, temperature=0)
    assert got[0] == expected[0] and got[1] == expected[1][:4]


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-3, ValueError), (1.5, TypeError), ("8", TypeError)])
def test_decoder_step_budget_must_be_a_positive_int(model, bad, error):
    decoder = _C._GptDecoder(model._config_tuple, model._parameters_in_order(), 1)
    decoder.add([1, 2, 3], 0.0, None, None, 0, None, 2)
    with pytest.raises(error, match="max_rows|step"):
        decoder.step(bad)
    with pytest.raises(TypeError):
        decoder.step(4, 4)
    assert len(decoder.step(None)) == 1  # the decoder is unharmed
