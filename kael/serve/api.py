"""kael.serve's HTTP API: OpenAI's completions schema on FastAPI, the tokenizer endpoints, health,
metrics and the page (docs/decisions/serving.md).

Requests are parsed and checked here, by hand rather than by pydantic models, so that every bad
input gets OpenAI's error body ({"error": {"message", "type", "param", "code"}}) with 400, 401,
404, 413 or 429, and never a 422 or a 500: the body is read in chunks up to max_body (413 as
soon as it is exceeded), must be UTF-8 JSON (NaN and Infinity literals refused, nesting bounded
by the parser's recursion check) and an object whose fields are known and well typed.
"""
from __future__ import annotations

import asyncio
import contextlib
import hmac
import html
import json
import math
import os
import secrets
import time

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from kael.serve.engine import PREFILL_ROWS, Engine, QueueFull, Request as EngineRequest, Sequence, Unavailable, load_model
from kael.serve.metrics import Metrics

__all__ = ["create_app"]

_STATIC = os.path.dirname(os.path.abspath(__file__))  # the page, index.html, sits beside this module

# OpenAI's completion fields that kael.serve takes, and those it accepts only at their neutral value
_NEUTRAL = {"n": 1, "best_of": 1, "echo": False, "logprobs": None, "presence_penalty": 0, "frequency_penalty": 0,
            "logit_bias": None, "suffix": None}
_KNOWN = {"model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "stop", "seed", "stream",
          "stream_options", "user"} | set(_NEUTRAL)
MAX_STOP = 4  # OpenAI's limit on stop sequences
MAX_STOP_CHARS = 256
MAX_USER_CHARS = 256
_INLINE_ENCODE_CHARS = 8192  # longer prompts are tokenized on a worker thread, without the GIL


class ApiError(Exception):
    def __init__(self, status, message, param=None, code=None, type="invalid_request_error", headers=None):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.type = status, message, param, code, type
        self.headers = headers

    def response(self):
        body = {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}
        return JSONResponse(body, status_code=self.status, headers=self.headers)


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _show(value):
    """A value for an error message: JSON, cut short; a container only by its kind and size (a
    deeply nested one would exhaust json.dumps's recursion)."""
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    if isinstance(value, dict):
        return f"an object of {len(value)} fields"
    return json.dumps(value)[:80]


def _refuse_constant(name):
    raise ValueError(f"{name} is not valid JSON")


async def _read_json(request, max_body):
    """The body as a JSON object: 413 above max_body (from Content-Length, or counted while
    reading), 400 for a body that is not UTF-8, not JSON, too deeply nested or not an object."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_body:
        raise ApiError(413, f"the request body is {int(length)} bytes, above the limit of {max_body}",
                       code="request_too_large")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_body:
            raise ApiError(413, f"the request body is above the limit of {max_body} bytes", code="request_too_large")
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ApiError(400, f"the request body is not UTF-8: {e}", code="invalid_json") from None
    try:
        body = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise ApiError(400, "the request body is nested too deeply", code="invalid_json") from None
    except ValueError as e:
        raise ApiError(400, f"the request body is not valid JSON: {e}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError(400, f"the request body must be a JSON object, got {type(body).__name__}", code="invalid_json")
    return body


def _field(body, name, check, what, default=None):
    value = body.get(name, default)
    if value is None:
        return default
    if not check(value):
        raise ApiError(400, f"'{name}' must be {what}, got {_show(value)}", param=name,
                       code="invalid_type")
    return value


class _Server:
    """The state of one app: the engine, limits, metrics."""

    def __init__(self, model_dir, api_key, max_batch, max_tokens, max_queue, max_body, prefill_rows):
        self.model_dir = model_dir
        self.model_name = os.path.basename(os.path.abspath(model_dir))  # the id clients name it by
        self.api_key = api_key.encode("utf-8") if api_key else None
        self.max_tokens = max_tokens
        self.max_body = max_body
        self.created = int(time.time())
        model, tokenizer = load_model(model_dir)
        self.tokenizer = tokenizer
        self.block_size = model.config.block_size
        self.vocab_size = model.config.vocab_size
        self.engine = Engine(model, tokenizer, max_batch=max_batch, max_queue=max_queue, prefill_rows=prefill_rows)
        self.metrics = Metrics(self.engine.queue_depth, self.engine.active)
        self.engine.metrics = self.metrics
        self.draw = secrets.SystemRandom()

    async def encode(self, text):
        if len(text) <= _INLINE_ENCODE_CHARS:
            return self.tokenizer.encode_ordinary(text)
        return (await asyncio.to_thread(self.tokenizer.encode_batch, [text], 1, allowed_special=(),
                                        disallowed_special=()))[0]

    def check_model(self, body):
        model = body.get("model")
        if model is None:
            raise ApiError(400, "'model' is required", param="model", code="missing_field")
        if not isinstance(model, str):
            raise ApiError(400, f"'model' must be a string, got {_show(model)}", param="model",
                           code="invalid_type")
        if model != self.model_name:
            raise ApiError(404, f"the model '{model[:100]}' does not exist; this server serves '{self.model_name}'",
                           param="model", code="model_not_found")

    async def completion_request(self, body):
        """The checked request: (list of Sequences, stream, include_usage)."""
        for name in body:
            if name not in _KNOWN:
                raise ApiError(400, f"'{name[:100]}' is not supported by kael.serve", param=name[:100],
                               code="unsupported_parameter")
        for name, neutral in _NEUTRAL.items():
            if name in body and body[name] is not None and body[name] != neutral:
                raise ApiError(400, f"'{name}' must be {json.dumps(neutral)} (the only value kael.serve supports), "
                               f"got {_show(body[name])}", param=name, code="unsupported_parameter")
        self.check_model(body)
        if "prompt" not in body or body["prompt"] is None:
            raise ApiError(400, "'prompt' is required", param="prompt", code="missing_field")
        prompt = body["prompt"]
        prompts = [prompt] if isinstance(prompt, str) else prompt
        if not (isinstance(prompts, list) and prompts and all(isinstance(p, str) for p in prompts)):
            raise ApiError(400, "'prompt' must be a string or a non-empty list of strings", param="prompt",
                           code="invalid_type")
        if len(prompts) > self.engine.max_queue:
            raise ApiError(400, f"'prompt' holds {len(prompts)} prompts, at most {self.engine.max_queue}",
                           param="prompt", code="invalid_value")
        max_tokens = _field(body, "max_tokens", _is_int, "an integer", 16)
        if not 0 <= max_tokens <= self.max_tokens:
            raise ApiError(400, f"'max_tokens' must be in [0, {self.max_tokens}], got {max_tokens}",
                           param="max_tokens", code="invalid_value")
        temperature = float(_field(body, "temperature", _is_number, "a number", 1.0))
        if not 0.0 <= temperature <= 2.0:
            raise ApiError(400, f"'temperature' must be in [0, 2], got {temperature}", param="temperature",
                           code="invalid_value")
        top_p = _field(body, "top_p", _is_number, "a number", None)
        if top_p is not None:
            top_p = float(top_p)
            if not 0.0 < top_p <= 1.0:
                raise ApiError(400, f"'top_p' must be in (0, 1], got {top_p}", param="top_p", code="invalid_value")
            if top_p == 1.0:
                top_p = None
        top_k = _field(body, "top_k", _is_int, "an integer", None)
        if top_k is not None and top_k != -1 and top_k < 1:
            raise ApiError(400, f"'top_k' must be at least 1 (or -1: all tokens), got {top_k}", param="top_k",
                           code="invalid_value")
        if top_k == -1:
            top_k = None
        seed = _field(body, "seed", _is_int, "an integer", None)
        if seed is not None and not 0 <= seed < 2**64:
            raise ApiError(400, f"'seed' must be in [0, 2**64), got {seed}", param="seed", code="invalid_value")
        if seed is None:
            seed = self.draw.getrandbits(63)
        stop = body.get("stop")
        stops = [] if stop is None else [stop] if isinstance(stop, str) else stop
        if not (isinstance(stops, list) and all(isinstance(s, str) for s in stops)):
            raise ApiError(400, "'stop' must be a string or a list of strings", param="stop", code="invalid_type")
        if len(stops) > MAX_STOP:
            raise ApiError(400, f"'stop' holds {len(stops)} sequences, at most {MAX_STOP}", param="stop",
                           code="invalid_value")
        if any(len(s) > MAX_STOP_CHARS for s in stops):
            raise ApiError(400, f"each 'stop' sequence must be at most {MAX_STOP_CHARS} characters", param="stop",
                           code="invalid_value")
        stream = _field(body, "stream", lambda v: isinstance(v, bool), "a boolean", False)
        options = _field(body, "stream_options", lambda v: isinstance(v, dict), "an object", {})
        if set(options) - {"include_usage"} or not isinstance(options.get("include_usage", False), bool):
            raise ApiError(400, "'stream_options' takes one field, include_usage (a boolean)", param="stream_options",
                           code="invalid_value")
        if options and not stream:
            raise ApiError(400, "'stream_options' is only allowed with 'stream': true", param="stream_options",
                           code="invalid_value")
        user = _field(body, "user", lambda v: isinstance(v, str), "a string", None)
        if user is not None and len(user) > MAX_USER_CHARS:
            raise ApiError(400, f"'user' must be at most {MAX_USER_CHARS} characters", param="user",
                           code="invalid_value")
        sequences = []
        for i, text in enumerate(prompts):
            ids = await self.encode(text)
            if not ids:
                if self.engine.end_of_text is None:
                    raise ApiError(400, "the prompt is empty (and the vocabulary has no <|endoftext|> to start from)",
                                   param="prompt", code="invalid_value")
                ids = [self.engine.end_of_text]
            if len(ids) + max_tokens > self.block_size:
                raise ApiError(400, f"this model's maximum context length is {self.block_size} tokens, however you "
                               f"requested {len(ids) + max_tokens} tokens ({len(ids)} in the prompt, {max_tokens} "
                               "for the completion)", param="prompt", code="context_length_exceeded")
            sequences.append(Sequence(i, ids, max_tokens, temperature, top_k, top_p, seed, stops))
        return sequences, stream, bool(options.get("include_usage", False))

    def submit(self, sequences):
        loop = asyncio.get_running_loop()
        request = EngineRequest(sequences, loop, asyncio.Queue())
        try:
            self.engine.submit(request)
        except QueueFull as e:
            raise ApiError(429, f"the server is busy: {e}; retry later", code="rate_limit_exceeded",
                           type="rate_limit_error", headers={"Retry-After": "1"}) from None
        except Unavailable as e:
            raise ApiError(503, f"the server cannot take requests: {e}", code="unavailable",
                           type="server_error") from None
        return request


async def _wait_disconnect(receive):
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


class _EventStream(Response):
    """Server-sent events from an async iterator; a client that goes away cancels the iterator
    at once (its finally cancels the request), whatever the ASGI version."""

    media_type = "text/event-stream"

    def __init__(self, events, on_close):
        # not Response.__init__: it would add content-length: 0 for the empty body
        self.status_code, self.background = 200, None
        self.raw_headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"),
                            (b"x-accel-buffering", b"no")]
        self.events, self.on_close = events, on_close

    async def __call__(self, scope, receive, send):
        async def stream():
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async for event in self.events:
                await send({"type": "http.response.body", "body": event, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        sender = asyncio.ensure_future(stream())
        watcher = asyncio.ensure_future(_wait_disconnect(receive))
        try:
            await asyncio.wait({sender, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sender, watcher):
                task.cancel()
            with contextlib.suppress(BaseException):
                await sender
            with contextlib.suppress(BaseException):
                await watcher
            self.on_close()


class _Guard:
    """ASGI middleware: the API key for /v1/* (before the body is read), and every answer
    counted by route and status code."""

    def __init__(self, app, server, routes):
        self.app, self.server, self.routes = app, server, routes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        status = None

        async def counting_send(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            if self.server.api_key is not None and path.startswith("/v1/"):
                headers = dict(scope["headers"])
                scheme, _, key = headers.get(b"authorization", b"").partition(b" ")
                if scheme.lower() != b"bearer" or not hmac.compare_digest(key.strip(), self.server.api_key):
                    response = ApiError(401, "incorrect or missing API key (send 'Authorization: Bearer <key>')",
                                        code="invalid_api_key", type="authentication_error").response()
                    return await response(scope, receive, counting_send)
            await self.app(scope, receive, counting_send)
        finally:
            self.server.metrics.requests.inc(route=path if path in self.routes else "other",
                                             status=str(status) if status is not None else "none")


def _sse(obj):
    return b"data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n\n"


def _add_token_routes(app, server):
    """POST /v1/tokenize ({"prompt"} -> its token ids) and /v1/detokenize ({"tokens"} -> the text)."""
    @app.post("/v1/tokenize")
    async def tokenize(request: Request):
        body = await _read_json(request, server.max_body)
        if "model" in body:
            server.check_model(body)
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise ApiError(400, "'prompt' must be a string", param="prompt",
                           code="missing_field" if prompt is None else "invalid_type")
        if set(body) - {"model", "prompt"}:
            name = sorted(set(body) - {"model", "prompt"})[0][:100]
            raise ApiError(400, f"'{name}' is not supported by /v1/tokenize", param=name, code="unsupported_parameter")
        tokens = await server.encode(prompt)
        return {"tokens": tokens, "count": len(tokens), "max_model_len": server.block_size}

    @app.post("/v1/detokenize")
    async def detokenize(request: Request):
        body = await _read_json(request, server.max_body)
        if "model" in body:
            server.check_model(body)
        tokens = body.get("tokens")
        if not (isinstance(tokens, list) and all(_is_int(t) for t in tokens)):
            raise ApiError(400, "'tokens' must be a list of integers", param="tokens",
                           code="missing_field" if tokens is None else "invalid_type")
        if set(body) - {"model", "tokens"}:
            name = sorted(set(body) - {"model", "tokens"})[0][:100]
            raise ApiError(400, f"'{name}' is not supported by /v1/detokenize", param=name,
                           code="unsupported_parameter")
        bad = [t for t in tokens if not 0 <= t < len(server.tokenizer)]
        if bad:
            raise ApiError(400, f"'tokens' holds ids outside the vocabulary [0, {len(server.tokenizer)}): {bad[:5]}",
                           param="tokens", code="invalid_value")
        return {"prompt": server.tokenizer.decode(tokens, errors="replace")}


def create_app(model_dir, api_key=None, max_batch=8, max_tokens=512, max_queue=64, max_body=1_000_000,
               prefill_rows=PREFILL_ROWS):
    """The ASGI app serving the model directory model_dir (GPT.save_pretrained's files and a
    tokenizer; kael.serve.engine.load_model). The scheduler thread starts with the app's
    lifespan and stops (cancelling what still runs) when it ends. prefill_rows: the rows one
    decoder step runs at most, decoding sequences first, new prompts in the rest (Note
    [Continuous batching]).

    >>> app = create_app("gpt-shakespeare")  # doctest: +SKIP
    >>> uvicorn.run(app, host="127.0.0.1", port=8000)  # doctest: +SKIP
    """
    for name, value in (("max_batch", max_batch), ("max_tokens", max_tokens), ("max_queue", max_queue),
                        ("max_body", max_body), ("prefill_rows", prefill_rows)):
        if not _is_int(value) or value < 1:
            raise ValueError(f"kael.serve: {name} must be a positive integer, got {value!r}")
    server = _Server(model_dir, api_key, max_batch, max_tokens, max_queue, max_body, prefill_rows)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        server.engine.start()
        try:
            yield
        finally:
            await asyncio.to_thread(server.engine.stop)

    app = FastAPI(title="kael.serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.server = server
    routes = {"/", "/healthz", "/metrics", "/v1/models", "/v1/completions", "/v1/tokenize", "/v1/detokenize"}

    app.add_middleware(_Guard, server=server, routes=routes)

    @app.exception_handler(ApiError)
    async def api_error(request, e):
        return e.response()

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request, e):
        code = {404: "not_found", 405: "method_not_allowed"}.get(e.status_code)
        return ApiError(e.status_code, str(e.detail), code=code).response()

    @app.exception_handler(Exception)
    async def internal_error(request, e):
        return ApiError(500, "internal server error", type="server_error", code="internal_error").response()

    with open(os.path.join(_STATIC, "index.html"), encoding="utf-8") as f:
        page_html = f.read().replace("{{MODEL}}", html.escape(server.model_name))

    @app.get("/", response_class=HTMLResponse)
    async def page():
        return HTMLResponse(page_html)

    @app.get("/healthz")
    async def healthz():
        """200 {"status": "ok", ...} while requests can be served; 503 {"status": "unavailable"} when
        the server is stopping or its scheduler failed."""
        engine = server.engine
        body = {"status": "ok" if engine.healthy() else "unavailable", "active": engine.active(),
                "queued": engine.queue_depth(), "steps": engine.steps}
        if engine.failure:
            body["error"] = engine.failure
        return JSONResponse(body, status_code=200 if engine.healthy() else 503)

    @app.get("/metrics")
    async def metrics():
        return PlainTextResponse(server.metrics.render(), media_type="text/plain; version=0.0.4")

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": server.model_name, "object": "model", "created": server.created,
                                            "owned_by": "kael", "max_model_len": server.block_size}]}

    _add_token_routes(app, server)

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await _read_json(request, server.max_body)
        sequences, stream, include_usage = await server.completion_request(body)
        job = server.submit(sequences)
        meta = {"id": "cmpl-" + secrets.token_hex(12), "object": "text_completion", "created": int(time.time()),
                "model": server.model_name}
        prompt_tokens = sum(len(s.prompt_ids) for s in sequences)

        def usage():
            completion = sum(s.tokens for s in sequences)
            return {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
                    "total_tokens": prompt_tokens + completion}

        if stream:
            return _EventStream(_stream(job, meta, usage, include_usage), lambda: server.engine.cancel(job))
        return await _complete(request, server, job, meta, usage)

    return app


def _failed(update):
    if update.finish_reason == "cancelled":
        return ApiError(503, "the request was cancelled: the server is shutting down", type="server_error",
                        code="shutting_down")
    return ApiError(500, update.error or "generation failed", type="server_error", code="internal_error")


async def _stream(job, meta, usage, include_usage):
    """The SSE events of a streamed completion: one chunk per generated token and sequence, then
    a usage chunk if asked, then [DONE]."""
    remaining = len(job.sequences)
    while remaining:
        for update in await job.queue.get():
            if update.finish_reason in ("cancelled", "error"):
                e = _failed(update)
                yield _sse({"error": {"message": e.message, "type": e.type, "param": None, "code": e.code}})
                yield b"data: [DONE]\n\n"
                return
            choice = {"text": update.text, "index": update.index, "logprobs": None,
                      "finish_reason": update.finish_reason}
            yield _sse({**meta, "choices": [choice]})
            remaining -= update.finish_reason is not None
    if include_usage:
        yield _sse({**meta, "choices": [], "usage": usage()})
    yield b"data: [DONE]\n\n"


async def _complete(request, server, job, meta, usage):
    """A whole completion, or nothing if the client went away first (its request cancelled)."""
    texts = {s.index: [] for s in job.sequences}
    reasons = {}

    async def collect():
        while len(reasons) < len(job.sequences):
            for update in await job.queue.get():
                if update.finish_reason in ("cancelled", "error"):
                    raise _failed(update)
                texts[update.index].append(update.text)
                if update.finish_reason is not None:
                    reasons[update.index] = update.finish_reason

    collector = asyncio.ensure_future(collect())
    watcher = asyncio.ensure_future(_wait_disconnect(request.receive))
    try:
        await asyncio.wait({collector, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not collector.done():
            collector.cancel()
            server.engine.cancel(job)
    if not collector.done() or collector.cancelled():
        return Response(status_code=499)  # nobody reads it
    collector.result()  # raises an ApiError of a failed generation
    choices = [{"text": "".join(texts[i]), "index": i, "logprobs": None, "finish_reason": reasons[i]}
               for i in sorted(texts)]
    return JSONResponse({**meta, "choices": choices, "usage": usage()})
