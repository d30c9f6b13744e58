"""python -m kael.serve --model DIR: serves a model directory over HTTP (kael.serve)."""
import argparse
import logging
import os
import re
import signal
import sys
import threading

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def byte_size(text):
    """'1MB' -> 1000000, '64KiB' -> 65536, '500' -> 500."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS or int(m.group(1)) < 1:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 1MB, 512KiB, 100000)")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m kael.serve",
        description="Serve a kael.GPT model directory (GPT.save_pretrained's files and tokenizer.tiktoken, or "
                    "vocab.json + merges.txt) with OpenAI's completions API, a web page at / and /metrics.")
    p.add_argument("--model", required=True, help="the model directory (e.g. gpt_train's output, gpt-shakespeare)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free port)")
    p.add_argument("--api-key", default=os.environ.get("KAEL_SERVE_API_KEY") or None,
                   help="require 'Authorization: Bearer KEY' on /v1/* (default: $KAEL_SERVE_API_KEY, which keeps "
                        "the key out of the process list; unset: no key)")
    p.add_argument("--max-batch", type=positive, default=8,
                   help="sequences decoded together (decoder slots; default 8)")
    p.add_argument("--max-tokens", type=positive, default=512,
                   help="the largest max_tokens a request may ask (default 512)")
    p.add_argument("--max-queue", type=positive, default=64,
                   help="sequences waiting for a slot before 429 (default 64)")
    p.add_argument("--prefill-rows", type=positive, default=128,
                   help="rows a decoder step runs at most: one per running sequence, new prompts in the rest "
                        "(default 128; larger: faster first tokens, longer pauses in running streams while "
                        "prompts arrive)")
    p.add_argument("--max-body", type=byte_size, default=10**6, help="largest request body (default 1MB)")
    p.add_argument("--shutdown-timeout", type=float, default=10.0,
                   help="seconds SIGTERM lets running requests finish before cancelling them (default 10)")
    p.add_argument("--threads", type=positive, default=None,
                   help="threads for kael's kernels in the decoder step (default: kael.get_num_threads())")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    import uvicorn

    from kael.serve import create_app

    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s: %(message)s")
    if args.threads is not None:
        import kael

        kael.set_num_threads(args.threads)
    app = create_app(args.model, api_key=args.api_key, max_batch=args.max_batch, max_tokens=args.max_tokens,
                     max_queue=args.max_queue, max_body=args.max_body, prefill_rows=args.prefill_rows)
    engine = app.state.server.engine

    class Server(uvicorn.Server):
        """On SIGTERM or SIGINT uvicorn stops accepting and waits for the running requests; the
        ones still generating after --shutdown-timeout are cancelled by the engine, so that each
        handler ends by itself (an error event and [DONE] for a stream, 503 otherwise) well before
        uvicorn's own deadline would cancel the handlers' tasks."""

        def handle_exit(self, sig, frame):
            if not self.should_exit:
                timer = threading.Timer(args.shutdown_timeout, engine.stop)
                timer.daemon = True
                timer.start()
            super().handle_exit(sig, frame)

    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                            timeout_graceful_shutdown=args.shutdown_timeout + 10, server_header=False)
    server = Server(config)
    # uvicorn raises the signal again once it has shut down, against the handler it found: this
    # one, which notes it, so that SIGTERM exits with status 0 and Ctrl-C with 130, both without a
    # traceback (with Python's own SIGINT handler in place, asyncio would raise KeyboardInterrupt).
    received = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: received.append(signum))
    server.run()
    if not server.started:
        return 1
    return 130 if signal.SIGINT in received else 0


if __name__ == "__main__":
    sys.exit(main())
