"""What kael.serve serves: a model directory with Hugging Face's vocab.json + merges.txt instead of
tokenizer.tiktoken (served in-process by uvicorn from create_app), and the directories it
refuses at start."""
import contextlib
import json
import os
import subprocess
import threading

import httpx
import pytest
import uvicorn

import kael
from kael.serve import create_app
from serve_helpers import PYTHON, ROOT, free_port, make_model_dir, wait_until


@contextlib.contextmanager
def served(app, log_level="critical"):
    """The ASGI app served by uvicorn on a loopback port in a thread of this process; yields the
    base URL and stops the server (the thread must end) on leaving."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level=log_level))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: server.started, timeout=30)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
    assert not thread.is_alive()


def bytes_to_unicode():
    """GPT-2's printable stand-ins for the 256 bytes (vocab.json's and merges.txt's alphabet)."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def gpt2_byte_order(tokenizer):
    """The tokenizer with its 256 byte tokens renumbered in GPT-2's order (the order of
    bytes_to_unicode, which vocab.json + merges.txt imply); the merges and specials keep their ids."""
    order = list(bytes_to_unicode())
    ranks = {tokenizer.id_to_token(i): i for i in range(256, len(tokenizer))
             if i not in set(tokenizer.special_tokens.values())}
    ranks |= {bytes([b]): i for i, b in enumerate(order)}
    return kael.BpeTokenizer(ranks, tokenizer.special_tokens)


def write_hf_tokenizer(tokenizer, directory):
    """vocab.json and merges.txt of a byte-level BPE tokenizer in GPT-2's byte order: each merge
    recovered as the two parts BPE with the lower ranks leaves of the token's bytes."""
    specials = set(tokenizer.special_tokens.values())
    ranks = {tokenizer.id_to_token(i): i for i in range(len(tokenizer)) if i not in specials}
    alphabet = bytes_to_unicode()
    spell = lambda b: "".join(alphabet[x] for x in b)  # noqa: E731
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(token) < 2:
            continue
        parts = [bytes([b]) for b in token]
        while len(parts) > 2:
            best, i = min((ranks.get(parts[i] + parts[i + 1], 1 << 62), i) for i in range(len(parts) - 1))
            assert best < rank
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        merges.append(f"{spell(parts[0])} {spell(parts[1])}")
    vocab = {spell(t): i for t, i in ranks.items()} | tokenizer.special_tokens
    with open(os.path.join(directory, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(directory, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "\n".join(merges) + "\n")


def test_hugging_face_tokenizer_files_served_from_create_app(tmp_path):
    model_dir, model, tokenizer = make_model_dir(tmp_path / "hf-gpt")
    tokenizer = gpt2_byte_order(tokenizer)
    os.remove(os.path.join(model_dir, "tokenizer.tiktoken"))
    os.remove(os.path.join(model_dir, "tokenizer.tiktoken.special_tokens.json"))
    write_hf_tokenizer(tokenizer, model_dir)
    hf = kael.BpeTokenizer.from_vocab_merges(os.path.join(model_dir, "vocab.json"),
                                             os.path.join(model_dir, "merges.txt"))
    sample = "First Citizen:\nBefore we proceed any further, hear me speak. é"
    assert hf.encode_ordinary(sample) == tokenizer.encode_ordinary(sample)
    assert hf.special_tokens == tokenizer.special_tokens

    with served(create_app(model_dir, max_batch=2), log_level="warning") as base:
        r = httpx.post(base + "/v1/completions",
                       json={"model": "hf-gpt", "prompt": sample, "max_tokens": 30, "seed": 77}, timeout=60)
    assert r.status_code == 200, r.text
    row = model.generate([tokenizer.encode_ordinary(sample)], 30, seed=77, stop_tokens=[383])[0]
    text = tokenizer.decode(row[:-1] if row[-1] == 383 else row)
    assert r.json()["choices"][0]["text"] == text


def start_fails(model_dir):
    r = subprocess.run([PYTHON, "-m", "kael.serve", "--model", str(model_dir), "--port", str(free_port())], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    return r.returncode, r.stderr


def test_directories_refused_at_start(tmp_path):
    code, err = start_fails(tmp_path / "missing")
    assert code != 0 and "is not a directory" in err
    model_dir, _, tokenizer = make_model_dir(tmp_path / "no-tokenizer")
    os.remove(os.path.join(model_dir, "tokenizer.tiktoken"))
    code, err = start_fails(model_dir)
    assert code != 0 and "no tokenizer" in err
    # a tokenizer larger than the model's vocabulary
    model_dir, _, _ = make_model_dir(tmp_path / "small-vocab")
    kael.manual_seed(0)
    kael.GPT(kael.GPTConfig(vocab_size=300, block_size=32, n_layer=1, n_head=2, n_embd=16)).save_pretrained(model_dir)
    code, err = start_fails(model_dir)
    assert code != 0 and "the tokenizer has 384 tokens, the model's vocabulary 300" in err


@pytest.mark.parametrize("flag,value", [("--max-batch", "0"), ("--max-body", "12XB"), ("--max-queue", "-1")])
def test_bad_flags(tmp_path, flag, value):
    r = subprocess.run([PYTHON, "-m", "kael.serve", "--model", str(tmp_path), flag, value], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and flag in r.stderr


class _Broken:
    """A Decoder whose step fails: what a bug or an allocation failure in the step would do."""

    def __init__(self, decoder):
        self.decoder = decoder

    def __getattr__(self, name):
        return getattr(self.decoder, name)

    def step(self, max_rows=None):
        raise MemoryError("no memory for the step")


def test_scheduler_failure_gives_errors_and_an_unhealthy_healthz(tmp_path):
    model_dir, _, _ = make_model_dir(tmp_path / "gpt")
    app = create_app(model_dir)
    engine = app.state.server.engine
    with served(app) as base:
        assert httpx.get(base + "/healthz").json()["status"] == "ok"
        engine._decoder = _Broken(engine._decoder)
        r = httpx.post(base + "/v1/completions", json={"model": "gpt", "prompt": "a", "max_tokens": 5}, timeout=30)
        assert r.status_code == 500 and r.json()["error"]["code"] == "internal_error"
        r = httpx.get(base + "/healthz")
        assert r.status_code == 503 and r.json()["status"] == "unavailable"
        assert "MemoryError: no memory for the step" in r.json()["error"]
        r = httpx.post(base + "/v1/completions", json={"model": "gpt", "prompt": "a", "max_tokens": 5}, timeout=30)
        assert r.status_code == 503 and r.json()["error"]["code"] == "unavailable"


class _Recorder:
    """A Decoder that records each step's row budget and events."""

    def __init__(self, decoder):
        self.decoder = decoder
        self.steps = []

    def __getattr__(self, name):
        return getattr(self.decoder, name)

    def step(self, max_rows=None):
        events = self.decoder.step(max_rows)
        self.steps.append((max_rows, events))
        return events


def test_a_long_prompt_is_prefilled_between_the_running_streams_steps(tmp_path):
    """With prefill_rows=16, a 200-token prompt joining a running sequence is prefilled 15 rows a
    step while the running one draws a token at every step; both texts are generate's."""
    model_dir, model, tokenizer = make_model_dir(tmp_path / "gpt", end_of_text=False)
    app = create_app(model_dir, prefill_rows=16)
    engine = app.state.server.engine
    recorder = engine._decoder = _Recorder(engine._decoder)
    with open(os.path.join(ROOT, "kael", "data", "tinyshakespeare.txt"), encoding="utf-8") as f:
        text = f.read(5000)
    short = "ROMEO:"
    ids = tokenizer.encode_ordinary(text)[:200]
    long = tokenizer.decode(ids)
    assert tokenizer.encode_ordinary(long) == ids and len(tokenizer.encode_ordinary(short)) <= 15
    with served(app) as base:
        r = httpx.post(base + "/v1/completions", timeout=120,
                       json={"model": "gpt", "prompt": [short, long], "max_tokens": 30, "seed": 17})
    assert r.status_code == 200, r.text
    assert {rows for rows, _ in recorder.steps} == {16}
    slots = [[slot for slot, token, _ in events if token >= 0] for _, events in recorder.steps]
    # the short prompt fits the first step; the long one, oldest second, takes 15 rows a step
    first_long = next(i for i, s in enumerate(slots) if len(s) == 2)
    assert len(slots[0]) == 1 and first_long == -(-(200 - (16 - len(tokenizer.encode_ordinary(short)))) // 15)
    assert all(len(s) == 1 for s in slots[:first_long])  # the running stream never waited
    rows = model.generate([tokenizer.encode_ordinary(short), ids], 30, temperature=1.0, seed=17)
    assert [c["text"] for c in r.json()["choices"]] == [tokenizer.decode(row, errors="replace") for row in rows]
