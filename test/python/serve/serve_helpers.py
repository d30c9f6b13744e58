"""Shared by the kael.serve tests: a tiny model directory and a real server in a subprocess."""
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import kael

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CORPUS = os.path.join(ROOT, "kael", "data", "tinyshakespeare.txt")
PYTHON = sys.executable


def make_model_dir(path, block_size=256, n_layer=2, n_head=4, n_embd=64, vocab_size=384, seed=0,
                   end_of_text=True):
    """A random kael.GPT saved by save_pretrained, with a small BPE tokenizer trained on the
    bundled Shakespeare (its last id <|endoftext|>, unless end_of_text is false: then no sequence
    stops before max_tokens) saved beside it as tokenizer.tiktoken. Returns (path, model,
    tokenizer)."""
    with open(CORPUS, encoding="utf-8") as f:
        text = f.read(100_000)
    tokenizer = kael.BpeTokenizer.train(text, vocab_size, special_tokens=["<|endoftext|>"] if end_of_text else [])
    kael.manual_seed(seed)
    config = kael.GPTConfig(vocab_size=len(tokenizer), block_size=block_size, n_layer=n_layer, n_head=n_head,
                            n_embd=n_embd)
    model = kael.GPT(config).eval()
    os.makedirs(path, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save(os.path.join(path, "tokenizer.tiktoken"))
    return str(path), model, tokenizer


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url, timeout=5.0, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


class Server:
    """python -m kael.serve in a subprocess on a free loopback port, ready once /healthz answers."""

    def __init__(self, model_dir, *args, log_path=None, env=None):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._log = open(log_path, "wb") if log_path else subprocess.DEVNULL
        env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
        self.proc = subprocess.Popen([PYTHON, "-m", "kael.serve", "--model", str(model_dir), "--port",
                                      str(self.port), "--log-level", "warning", *map(str, args)],
                                     cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kael.serve exited with {self.proc.returncode}: {self.log()}")
            with contextlib.suppress(OSError):
                if get_json(self.base + "/healthz", timeout=1.0)["status"] == "ok":
                    break
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("kael.serve did not answer /healthz within 60 s")
            time.sleep(0.05)

    def health(self):
        return get_json(self.base + "/healthz")

    def log(self):
        if not self.log_path:
            return ""
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")[-4000:]

    def terminate(self, timeout=30):
        """SIGTERM; the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self.kill()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self._log is not subprocess.DEVNULL:
            self._log.close()
            self._log = subprocess.DEVNULL


def wait_until(predicate, timeout=10.0, interval=0.01):
    """Polls predicate() until true; its last value (false at the timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)
