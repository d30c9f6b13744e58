"""kael.serve's API against a real server on loopback, driven by the official openai client and
httpx: completions (plain, streamed, batched, with stops) equal kael.GPT.generate with the same
seed, the tokenizer endpoints, metrics, authentication and every kind of bad input."""
import concurrent.futures
import json
import socket

import httpx
import openai
import pytest
from openai import OpenAI

from serve_helpers import Server, get_json, make_model_dir

KEY = "test-key-123"
MAX_BODY = 200_000


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve_api")
    model_dir, model, tokenizer = make_model_dir(root / "tiny-gpt")
    server = Server(model_dir, "--api-key", KEY, "--max-batch", 4, "--max-tokens", 200, "--max-body", MAX_BODY,
                    log_path=root / "server.log")
    client = OpenAI(base_url=server.base + "/v1", api_key=KEY, max_retries=0, timeout=60)
    http = httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
    yield server, client, http, model, tokenizer
    http.close()
    client.close()
    assert server.terminate() == 0, server.log()


EOT = 383  # the tokenizer's <|endoftext|>, its last id


def reference(model, tokenizer, prompts, max_tokens, seed, temperature=1.0, top_p=None, top_k=None):
    """[(text, completion_tokens, finish_reason)] of kael.GPT.generate for each prompt, with the
    server's conventions: <|endoftext|> stops a sequence and is not part of its text."""
    ids = [tokenizer.encode_ordinary(p) for p in prompts]
    rows = model.generate(ids, max_tokens, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                          stop_tokens=[EOT])
    out = []
    for row in rows:
        stopped = bool(row) and row[-1] == EOT
        text = tokenizer.decode(row[:-1] if stopped else row, errors="replace")
        out.append((text, len(row), "stop" if stopped else "length"))
    return out


def test_models(env):
    server, client, *_ = env
    models = client.models.list()
    assert [m.id for m in models.data] == ["tiny-gpt"]


@pytest.mark.parametrize("seed,prompt,temperature,top_p", [(1, "ROMEO:", 1.0, None), (7, "First Citizen:\n", 0.8, 0.9),
                                                           (123456789, "O, what", 1.3, None), (5, "KING", 0.0, None)])
def test_completion_matches_generate(env, seed, prompt, temperature, top_p):
    server, client, http, model, tokenizer = env
    kwargs = {"top_p": top_p} if top_p is not None else {}
    r = client.completions.create(model="tiny-gpt", prompt=prompt, max_tokens=40, seed=seed, temperature=temperature,
                                  **kwargs)
    (text, n, reason), = reference(model, tokenizer, [prompt], 40, seed, temperature, top_p)
    assert r.object == "text_completion" and r.model == "tiny-gpt" and r.id.startswith("cmpl-")
    assert r.choices[0].text == text
    assert r.choices[0].finish_reason == reason and r.choices[0].index == 0
    prompt_tokens = len(tokenizer.encode_ordinary(prompt))
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (prompt_tokens, n,
                                                                                         prompt_tokens + n)


def test_streaming_matches_generate(env):
    server, client, http, model, tokenizer = env
    stream = client.completions.create(model="tiny-gpt", prompt="JULIET:", max_tokens=60, seed=99, stream=True,
                                       stream_options={"include_usage": True})
    chunks = list(stream)
    (text, n, reason), = reference(model, tokenizer, ["JULIET:"], 60, 99)
    token_chunks = [c for c in chunks if c.choices]
    assert "".join(c.choices[0].text for c in token_chunks) == text
    assert len(token_chunks) == n  # one chunk per token
    assert [c.choices[0].finish_reason for c in token_chunks] == [None] * (n - 1) + [reason]
    assert chunks[-1].usage.completion_tokens == n and not chunks[-1].choices
    assert len({c.id for c in chunks}) == 1


def test_stream_never_splits_a_character(env):
    server, client, http, model, tokenizer = env
    # every chunk arrives as valid JSON text; a token that ends inside a UTF-8 character sends ""
    with http.stream("POST", "/v1/completions", json={"model": "tiny-gpt", "prompt": "é", "max_tokens": 100,
                                                       "seed": 3, "temperature": 1.5, "stream": True}) as r:
        pieces = [json.loads(line[6:])["choices"][0]["text"] for line in r.iter_lines()
                  if line.startswith("data: {")]
    (text, n, _), = reference(model, tokenizer, ["é"], 100, 3, 1.5)
    assert "".join(pieces) == text and len(pieces) == n


def test_batched_requests_give_the_same_text_as_alone(env):
    server, client, http, model, tokenizer = env
    cases = [(f"prompt {i}: " + "To be or not to be " * (i % 3), 11 + i, 30 + 5 * i) for i in range(8)]

    def one(case):
        prompt, seed, max_tokens = case
        r = client.completions.create(model="tiny-gpt", prompt=prompt, max_tokens=max_tokens, seed=seed)
        return r.choices[0].text, r.usage.completion_tokens

    def batched_steps():  # steps that ran more than one sequence
        m = _metrics(http)
        return m["kael_serve_step_sequences_count"] - m['kael_serve_step_sequences_bucket{le="1.0"}']

    before = batched_steps()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, cases))
    assert batched_steps() > before  # the requests did run together
    for (prompt, seed, max_tokens), got in zip(cases, results):
        text, n, _ = reference(model, tokenizer, [prompt], max_tokens, seed)[0]
        assert got == (text, n)


def test_list_of_prompts_is_generate_over_the_rows(env):
    server, client, http, model, tokenizer = env
    prompts = ["ROMEO:", "A horse! a horse!", "\n"]
    r = client.completions.create(model="tiny-gpt", prompt=prompts, max_tokens=25, seed=2024)
    ref = reference(model, tokenizer, prompts, 25, 2024)
    assert [(c.index, c.text, c.finish_reason) for c in r.choices] == [(i, t, f) for i, (t, _, f) in enumerate(ref)]
    assert r.usage.completion_tokens == sum(n for _, n, _ in ref)


def test_stop_strings(env):
    server, client, http, model, tokenizer = env
    (full, _, _), = reference(model, tokenizer, ["ROMEO:"], 80, 31)
    stop = full[20:23]
    cut = full[:full.find(stop)]
    r = client.completions.create(model="tiny-gpt", prompt="ROMEO:", max_tokens=80, seed=31, stop=[stop, "\x00zz"])
    assert (r.choices[0].text, r.choices[0].finish_reason) == (cut, "stop")
    assert r.usage.completion_tokens < 80
    # streamed: the text held back while it could be the start of the stop string is never sent
    chunks = list(client.completions.create(model="tiny-gpt", prompt="ROMEO:", max_tokens=80, seed=31, stop=stop,
                                            stream=True))
    assert "".join(c.choices[0].text for c in chunks) == cut
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_zero_tokens_and_empty_prompt(env):
    server, client, http, model, tokenizer = env
    r = client.completions.create(model="tiny-gpt", prompt="ROMEO:", max_tokens=0)
    assert (r.choices[0].text, r.choices[0].finish_reason, r.usage.completion_tokens) == ("", "length", 0)
    r = client.completions.create(model="tiny-gpt", prompt="", max_tokens=5, seed=1)
    ids = model.generate([[EOT]], 5, seed=1, stop_tokens=[EOT])[0]
    assert r.usage.prompt_tokens == 1 and r.usage.completion_tokens == len(ids)


def test_tokenize_detokenize(env):
    server, client, http, model, tokenizer = env
    text = "Now is the winter of our discontent — é ü"
    r = http.post("/v1/tokenize", json={"model": "tiny-gpt", "prompt": text})
    assert r.status_code == 200 and r.json()["tokens"] == tokenizer.encode_ordinary(text)
    assert r.json()["max_model_len"] == 256
    r = http.post("/v1/detokenize", json={"tokens": r.json()["tokens"]})
    assert r.status_code == 200 and r.json()["prompt"] == text
    r = http.post("/v1/detokenize", json={"tokens": [1, 10**9]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tokens"


def test_api_key(env):
    server, client, http, *_ = env
    assert httpx.get(server.base + "/healthz").status_code == 200  # open
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}, {"Authorization": "Basic " + KEY},
                    {"Authorization": "Bearer " + KEY + "x"}):
        for method, path in (("GET", "/v1/models"), ("POST", "/v1/completions"), ("POST", "/v1/tokenize")):
            r = httpx.request(method, server.base + path, headers=headers, json={"model": "tiny-gpt", "prompt": "a"})
            assert r.status_code == 401, (headers, path)
            assert r.json()["error"]["code"] == "invalid_api_key"
    bad = OpenAI(base_url=server.base + "/v1", api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.completions.create(model="tiny-gpt", prompt="a", max_tokens=1)


def _nested(depth):
    return '{"model": "tiny-gpt", "prompt": ' + "[" * depth + "]" * depth + "}"


BAD = [
    # (body: dict or raw bytes, status, param or None)
    ({"prompt": "a"}, 400, "model"),
    ({"model": 3, "prompt": "a"}, 400, "model"),
    ({"model": "other", "prompt": "a"}, 404, "model"),
    ({"model": "tiny-gpt"}, 400, "prompt"),
    ({"model": "tiny-gpt", "prompt": 5}, 400, "prompt"),
    ({"model": "tiny-gpt", "prompt": ["a", 5]}, 400, "prompt"),
    ({"model": "tiny-gpt", "prompt": []}, 400, "prompt"),
    ({"model": "tiny-gpt", "prompt": {"a": 1}}, 400, "prompt"),
    ({"model": "tiny-gpt", "prompt": "a", "max_tokens": "10"}, 400, "max_tokens"),
    ({"model": "tiny-gpt", "prompt": "a", "max_tokens": 1.5}, 400, "max_tokens"),
    ({"model": "tiny-gpt", "prompt": "a", "max_tokens": -1}, 400, "max_tokens"),
    ({"model": "tiny-gpt", "prompt": "a", "max_tokens": 201}, 400, "max_tokens"),
    ({"model": "tiny-gpt", "prompt": "a", "max_tokens": 10**30}, 400, "max_tokens"),
    ({"model": "tiny-gpt", "prompt": "a", "max_tokens": True}, 400, "max_tokens"),
    ({"model": "tiny-gpt", "prompt": "a", "temperature": -0.5}, 400, "temperature"),
    (b'{"model": "tiny-gpt", "prompt": "a", "temperature": NaN}', 400, None),
    (b'{"model": "tiny-gpt", "prompt": "a", "temperature": Infinity}', 400, None),
    ({"model": "tiny-gpt", "prompt": "a", "temperature": 1e308 * 10}, 400, None),  # json.dumps writes Infinity
    ({"model": "tiny-gpt", "prompt": "a", "temperature": "hot"}, 400, "temperature"),
    ({"model": "tiny-gpt", "prompt": "a", "top_p": 0}, 400, "top_p"),
    ({"model": "tiny-gpt", "prompt": "a", "top_p": 1.01}, 400, "top_p"),
    ({"model": "tiny-gpt", "prompt": "a", "top_p": -1}, 400, "top_p"),
    ({"model": "tiny-gpt", "prompt": "a", "top_k": 0}, 400, "top_k"),
    ({"model": "tiny-gpt", "prompt": "a", "seed": -1}, 400, "seed"),
    ({"model": "tiny-gpt", "prompt": "a", "seed": 2**64}, 400, "seed"),
    ({"model": "tiny-gpt", "prompt": "a", "seed": "1"}, 400, "seed"),
    ({"model": "tiny-gpt", "prompt": "a", "n": 2}, 400, "n"),
    ({"model": "tiny-gpt", "prompt": "a", "best_of": 3}, 400, "best_of"),
    ({"model": "tiny-gpt", "prompt": "a", "logprobs": 2}, 400, "logprobs"),
    ({"model": "tiny-gpt", "prompt": "a", "echo": True}, 400, "echo"),
    ({"model": "tiny-gpt", "prompt": "a", "presence_penalty": 0.5}, 400, "presence_penalty"),
    ({"model": "tiny-gpt", "prompt": "a", "suffix": "x"}, 400, "suffix"),
    ({"model": "tiny-gpt", "prompt": "a", "frobnicate": 1}, 400, "frobnicate"),
    ({"model": "tiny-gpt", "prompt": "a", "stream": "yes"}, 400, "stream"),
    ({"model": "tiny-gpt", "prompt": "a", "stream_options": {"include_usage": True}}, 400, "stream_options"),
    ({"model": "tiny-gpt", "prompt": "a", "stop": 5}, 400, "stop"),
    ({"model": "tiny-gpt", "prompt": "a", "stop": ["x", 5]}, 400, "stop"),
    ({"model": "tiny-gpt", "prompt": "a", "stop": [f"s{i}" for i in range(1000)]}, 400, "stop"),
    ({"model": "tiny-gpt", "prompt": "a", "stop": "x" * 1000}, 400, "stop"),
    ({"model": "tiny-gpt", "prompt": "a", "user": 7}, 400, "user"),
    ({"model": "tiny-gpt", "prompt": "a" * 100_000}, 400, "prompt"),  # far beyond the context
    ({"model": "tiny-gpt", "prompt": "To be, or not to be " * 60, "max_tokens": 1}, 400, "prompt"),
    ({"model": "tiny-gpt", "prompt": "ROMEO: " * 40, "max_tokens": 200}, 400, "prompt"),  # prompt + max_tokens
    ({"model": "tiny-gpt", "prompt": ["a"] * 65}, 400, "prompt"),
    (b"", 400, None),
    (b"not json", 400, None),
    (b'{"model": "tiny-gpt", "prompt": "a"', 400, None),
    (b"[1, 2]", 400, None),
    (b'"a string"', 400, None),
    (b"\xff\xfe{\x00}\x00", 400, None),  # not UTF-8
    ('{"model": "tiny-gpt", "prompt": "caf\u00e9"}'.encode("latin-1"), 400, None),
    (_nested(50_000).encode(), 400, None),  # deeper than the parser's recursion limit
    (_nested(500).encode(), 400, "prompt"),  # parsed, then refused by type
]


@pytest.mark.parametrize("body,status,param", BAD, ids=[f"{i}" for i in range(len(BAD))])
def test_bad_input(env, body, status, param):
    server, client, http, *_ = env
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    r = http.post("/v1/completions", content=content, headers={"Content-Type": "application/json"})
    assert r.status_code == status, r.text[:300]
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    assert error["param"] == param
    if param:
        assert param in error["message"]


def test_bad_input_through_the_client(env):
    server, client, *_ = env
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="tiny-gpt", prompt="a", n=2)
    assert e.value.body["param"] == "n"
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model="tiny-gpt", prompt="a", temperature=-1)
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="gpt-4", prompt="a")


def _raw(server, data, read=True):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(data)
        if not read:
            return b""
        response = b""
        while b"\r\n\r\n" not in response or not response.split(b"\r\n\r\n", 1)[1].rstrip().endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            response += chunk
        return response


def test_body_too_large(env):
    server, client, http, *_ = env
    auth = f"Authorization: Bearer {KEY}\r\n".encode()
    # Content-Length above the limit: 413 before a byte of the body is sent
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + auth
            + b"Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n")
    response = _raw(server, head)
    assert response.startswith(b"HTTP/1.1 413"), response[:200]
    assert b"request_too_large" in response
    # chunked, no length: 413 once the limit is passed, while the client is still sending
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + auth
            + b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    piece = b"x" * 65536
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(MAX_BODY // len(piece) + 2))
    response = _raw(server, head + chunks)  # the terminating chunk is never sent
    assert response.startswith(b"HTTP/1.1 413"), response[:200]
    # with the client
    r = http.post("/v1/completions", json={"model": "tiny-gpt", "prompt": "a" * (MAX_BODY + 10)})
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
    assert server.health()["status"] == "ok"


def test_unknown_routes_and_methods(env):
    server, client, http, *_ = env
    r = http.get("/v1/nothing")
    assert r.status_code == 404 and "error" in r.json()
    r = http.get("/v1/completions")
    assert r.status_code == 405 and "error" in r.json()


def _metrics(http):
    values = {}
    for line in http.get("/metrics").text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def test_server_unharmed_and_metrics(env):
    server, client, http, model, tokenizer = env
    # after all the bad input above the server still answers correctly
    r = client.completions.create(model="tiny-gpt", prompt="ROMEO:", max_tokens=10, seed=1)
    assert r.choices[0].text == reference(model, tokenizer, ["ROMEO:"], 10, 1)[0][0]
    text = http.get("/metrics").text
    assert "# TYPE kael_serve_requests_total counter" in text
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    assert values['kael_serve_requests_total{route="/v1/completions",status="200"}'] >= 10
    assert values['kael_serve_requests_total{route="/v1/completions",status="400"}'] >= 40
    assert values['kael_serve_requests_total{route="/v1/completions",status="401"}'] >= 5
    assert values['kael_serve_requests_total{route="/v1/completions",status="413"}'] >= 2
    assert values["kael_serve_generated_tokens_total"] >= 300
    assert values["kael_serve_time_to_first_token_seconds_count"] >= 10
    assert values['kael_serve_time_to_first_token_seconds_bucket{le="+Inf"}'] == \
        values["kael_serve_time_to_first_token_seconds_count"]
    assert values["kael_serve_inter_token_latency_seconds_count"] >= 300
    assert values["kael_serve_queue_depth"] == 0 and values["kael_serve_active_sequences"] == 0
    assert get_json(server.base + "/healthz")["active"] == 0


def test_nesting_near_the_recursion_limit(env):
    # every depth around Python's recursion limit: one that json.loads parses may still be too
    # deep for json.dumps (an error message that shows the value); always a 400
    server, client, http, *_ = env
    for field in ("temperature", "model", "n"):
        for depth in range(850, 1051):
            content = (b'{"model": "tiny-gpt", "prompt": "a", "%s": ' % field.encode() + b"[" * depth
                       + b"]" * depth + b"}")
            r = http.post("/v1/completions", content=content, headers={"Content-Type": "application/json"})
            assert r.status_code == 400, (field, depth, r.text[:300])
            assert r.json()["error"]["param"] in (None, field)
