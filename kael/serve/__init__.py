"""kael.serve: an OpenAI-compatible completion server for a kael.GPT model directory, with
continuous batching on the GPT's Decoder, a streaming web page and Prometheus metrics
(docs/decisions/serving.md).

    python -m kael.serve --model gpt-shakespeare            # http://127.0.0.1:8000/
    python -m kael.serve --help

create_app(model_dir, ...) returns the ASGI app, for tests and for embedding in another server:

>>> from kael.serve import create_app
>>> app = create_app("gpt-shakespeare", api_key="secret")  # doctest: +SKIP
"""
from kael.serve.api import create_app

__all__ = ["create_app"]
