"""kael.serve under load and at its edges, on a real server: the queue limit (429), a client
that goes away frees its slot, /healthz answers while the model generates, SIGTERM exits 0
after finishing (or cancelling) what runs."""
import json
import re
import signal
import socket
import threading
import time

import httpx
import pytest

from serve_helpers import Server, make_model_dir, wait_until

LONG = 2000  # tokens: seconds of generation on this model


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path, _, _ = make_model_dir(tmp_path_factory.mktemp("serve_life") / "gpt", block_size=2048, n_layer=4, n_embd=256,
                                end_of_text=False)
    return path


@pytest.fixture(scope="module")
def server(model_dir, tmp_path_factory):
    s = Server(model_dir, "--max-batch", 2, "--max-queue", 2, "--max-tokens", 2000,
               log_path=tmp_path_factory.mktemp("serve_life_log") / "server.log")
    yield s
    assert s.terminate() == 0, s.log()


def metric(server, name):
    text = httpx.get(server.base + "/metrics").text
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


class Streamer(threading.Thread):
    """A streaming completion read on a thread: .first is set at the first token chunk; the
    stream is closed (the connection dropped) once .close is set."""

    def __init__(self, server, max_tokens=LONG, seed=0, prompt="ROMEO:"):
        super().__init__(daemon=True)
        self.body = {"model": "gpt", "prompt": prompt, "max_tokens": max_tokens, "seed": seed, "stream": True}
        self.base = server.base
        self.first = threading.Event()
        self.close = threading.Event()
        self.chunks, self.done, self.status, self.error = [], False, None, None
        self.start()

    def run(self):
        try:
            with httpx.Client(timeout=120) as client, client.stream("POST", self.base + "/v1/completions",
                                                                    json=self.body) as r:
                self.status = r.status_code
                for line in r.iter_lines():
                    if line == "data: [DONE]":
                        self.done = True
                    elif line.startswith("data: "):
                        self.chunks.append(json.loads(line[6:]))
                        self.first.set()
                    if self.close.is_set():
                        return
        except Exception as e:  # noqa: BLE001 -- recorded for the test to look at
            self.error = e
        finally:
            self.first.set()


def test_queue_limit_gives_429_and_disconnects_free_slots(server):
    cancelled = metric(server, 'kael_serve_sequences_finished_total{reason="cancelled"}')
    running = [Streamer(server, seed=i) for i in range(2)]
    for s in running:
        assert s.first.wait(30) and s.status == 200
    queued = Streamer(server, seed=10)
    assert wait_until(lambda: server.health()["queued"] == 1, timeout=30)
    leaving = socket.create_connection(("127.0.0.1", server.port))
    leaving.sendall(_request({"model": "gpt", "prompt": "ROMEO:", "max_tokens": LONG, "stream": True}))
    assert wait_until(lambda: server.health()["queued"] == 2, timeout=30)
    assert server.health()["active"] == 2
    # max_batch running, max_queue waiting: the next request is refused at once
    r = httpx.post(server.base + "/v1/completions", json={"model": "gpt", "prompt": "a", "max_tokens": 5})
    assert r.status_code == 429, r.text
    assert r.headers["retry-after"] == "1"
    assert r.json()["error"]["code"] == "rate_limit_exceeded"
    # a waiting client goes away: it leaves the queue at once
    leaving.close()
    assert wait_until(lambda: server.health()["queued"] == 1, timeout=30)
    assert metric(server, 'kael_serve_sequences_finished_total{reason="cancelled"}') == cancelled + 1
    # the running clients go away: their slots go to the queued request at the next step
    for s in running:
        s.close.set()
    assert wait_until(lambda: queued.first.is_set(), timeout=30)
    assert wait_until(lambda: server.health()["queued"] == 0, timeout=30)
    assert queued.status == 200 and queued.error is None and queued.chunks
    queued.close.set()
    assert wait_until(lambda: server.health()["active"] == 0, timeout=30)
    assert metric(server, 'kael_serve_sequences_finished_total{reason="cancelled"}') == cancelled + 4
    # none of them ran to its end
    assert all(len(s.chunks) < LONG for s in running + [queued])


def _request(body):
    data = json.dumps(body).encode()
    return (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(data), data))


def test_disconnect_of_a_plain_request_frees_its_slot(server):
    cancelled = metric(server, 'kael_serve_sequences_finished_total{reason="cancelled"}')
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(_request({"model": "gpt", "prompt": "ROMEO:", "max_tokens": LONG}))
        assert wait_until(lambda: server.health()["active"] == 1, timeout=30)
    assert wait_until(lambda: server.health()["active"] == 0, timeout=30)
    assert metric(server, 'kael_serve_sequences_finished_total{reason="cancelled"}') == cancelled + 1


def test_healthz_answers_during_generation(server):
    streams = [Streamer(server, seed=i) for i in range(2)]
    for s in streams:
        assert s.first.wait(30)
    latencies, busy = [], 0
    with httpx.Client(base_url=server.base) as client:
        for _ in range(40):
            t = time.perf_counter()
            health = client.get("/healthz").json()
            latencies.append(time.perf_counter() - t)
            busy += health["active"] == 2
    for s in streams:
        s.close.set()
    assert busy == 40  # every answer came while both sequences were generating
    latencies.sort()
    assert latencies[len(latencies) // 2] < 0.05 and latencies[-1] < 0.5, latencies
    assert wait_until(lambda: server.health()["active"] == 0, timeout=30)


def test_sigterm_finishes_running_requests_and_exits_0(model_dir, tmp_path):
    s = Server(model_dir, log_path=tmp_path / "server.log")
    stream = Streamer(s, max_tokens=300)
    assert stream.first.wait(30)
    assert s.terminate() == 0, s.log()
    stream.join(30)
    # the request ran to its end: every token, its finish reason, [DONE]
    assert stream.done and stream.error is None
    assert len(stream.chunks) == 300 or stream.chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert stream.chunks[-1]["choices"][0]["finish_reason"] is not None


def test_sigterm_cancels_what_outlasts_the_shutdown_timeout_and_exits_0(model_dir, tmp_path):
    s = Server(model_dir, "--shutdown-timeout", 0.3, "--max-tokens", 2000, log_path=tmp_path / "server.log")
    streams = [Streamer(s, max_tokens=2000, seed=i) for i in range(3)]
    for st in streams:
        assert st.first.wait(30)
    t = time.monotonic()
    assert s.terminate() == 0, s.log()
    assert time.monotonic() - t < 10
    for st in streams:
        st.join(30)
        # the stream ends with an error event and [DONE], no finish reason before it
        assert not st.is_alive() and st.done and st.error is None and len(st.chunks) < 2000
        assert st.chunks[-1]["error"]["code"] == "shutting_down"
        assert all(c["choices"][0]["finish_reason"] is None for c in st.chunks[:-1])
    assert "Traceback" not in s.log(), s.log()


def test_sigterm_when_idle_and_the_key_from_the_environment(model_dir, tmp_path):
    s = Server(model_dir, log_path=tmp_path / "server.log", env={"KAEL_SERVE_API_KEY": "from-env"})
    assert httpx.get(s.base + "/v1/models").status_code == 401
    assert httpx.get(s.base + "/v1/models", headers={"Authorization": "Bearer from-env"}).status_code == 200
    assert s.terminate() == 0, s.log()


def test_ctrl_c_exits_130_without_a_traceback(model_dir, tmp_path):
    s = Server(model_dir, log_path=tmp_path / "server.log")
    s.proc.send_signal(signal.SIGINT)
    assert s.proc.wait(30) == 130
    log = s.log()
    s.kill()
    assert "Traceback" not in log and "KeyboardInterrupt" not in log, log
