"""Load test of kael.serve on loopback: streaming clients, /healthz under load, and a mixed run of
valid and invalid requests (docs/performance.md, "Serving").

    .venv/bin/python tools/bench/serve_load.py                      # a model of its own, 8 clients
    .venv/bin/python tools/bench/serve_load.py --model gpt-shakespeare --clients 8 --repeats 3

It starts `python -m kael.serve` on a free loopback port (never another host) and measures:
1. one streaming client, its requests one after another: tokens/s, TTFT, inter-token latency;
2. --clients concurrent streaming clients with mixed prompt lengths (each client its requests one
   after another) while a prober asks /healthz every 20 ms: requests/s, tokens/s, TTFT p50/p99,
   inter-token p50/p99/max, failed or lost requests, /healthz p50/p99;
   (1 and 2 --repeats times; the medians are printed)
3. --mixed requests, valid and invalid mixed, --mixed-concurrency at a time: every valid one must
   complete with its tokens, every invalid one get its 4xx, none lost; the server's RSS at the
   start and the end of the run.
Without --model it saves a random kael.GPT (--n-layer, --n-embd, --block-size; GPT-2 small's
shapes by default) with a BPE tokenizer trained on the bundled Shakespeare into a temporary
directory: throughput does not depend on the weights' values.
"""
import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "kael", "data", "tinyshakespeare.txt")


def percentile(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q / 100 * (len(values) - 1))))]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def make_model(path, args):
    import kael

    with open(CORPUS, encoding="utf-8") as f:
        text = f.read(300_000)
    tokenizer = kael.BpeTokenizer.train(text, args.vocab_size, special_tokens=["<|endoftext|>"])
    kael.manual_seed(0)
    config = kael.GPTConfig(vocab_size=len(tokenizer), block_size=args.block_size, n_layer=args.n_layer,
                            n_head=args.n_head, n_embd=args.n_embd)
    kael.GPT(config).save_pretrained(path)
    tokenizer.save(os.path.join(path, "tokenizer.tiktoken"))
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stats:
    def __init__(self):
        self.tokens = 0
        self.requests = 0
        self.failed = []
        self.ttft = []
        self.itl = []


async def stream_one(client, body, stats):
    """One streaming completion; its tokens, TTFT and inter-token gaps go to stats."""
    t0 = time.perf_counter()
    last = None
    tokens = 0
    done = False
    try:
        async with client.stream("POST", "/v1/completions", json=body) as r:
            if r.status_code != 200:
                stats.failed.append(f"status {r.status_code}: {(await r.aread())[:200]!r}")
                return
            async for line in r.aiter_lines():
                if line == "data: [DONE]":
                    done = True
                elif line.startswith("data: "):
                    chunk = json.loads(line[6:])
                    if "error" in chunk:
                        stats.failed.append(f"error event {chunk['error']}")
                        return
                    if chunk["choices"]:
                        now = time.perf_counter()
                        if last is None:
                            stats.ttft.append(now - t0)
                        else:
                            stats.itl.append(now - last)
                        last = now
                        tokens += 1
    except httpx.HTTPError as e:
        stats.failed.append(f"{type(e).__name__}: {e}")
        return
    if not done:
        stats.failed.append("stream ended without [DONE]")
        return
    stats.tokens += tokens
    stats.requests += 1


def prompt_of(rng, corpus, tokens_hint):
    start = rng.randrange(0, len(corpus) - 2000)
    return corpus[start:start + max(1, int(tokens_hint * 2))]  # at most about tokens_hint tokens


async def client_loop(client, model, n_requests, max_tokens, stats, rng, corpus, max_prompt_tokens, vary):
    for _ in range(n_requests):
        body = {"model": model, "prompt": prompt_of(rng, corpus, rng.randint(1, max_prompt_tokens)),
                "max_tokens": rng.randint(max(1, max_tokens // 4), max_tokens) if vary else max_tokens,
                "temperature": 0.8, "seed": rng.randrange(2**32), "stream": True}
        await stream_one(client, body, stats)


async def prober(client, stop, latencies):
    async with client:
        while not stop.is_set():
            t = time.perf_counter()
            r = await client.get("/healthz")
            if r.status_code == 200:
                latencies.append(time.perf_counter() - t)
            try:
                await asyncio.wait_for(stop.wait(), 0.02)
            except asyncio.TimeoutError:
                pass


async def run_clients(base, model, clients, n_requests, max_tokens, corpus, max_prompt_tokens, seed, vary=False):
    stats, health = Stats(), []
    stop = asyncio.Event()
    # every client made before the clock starts: making one (its SSL context) blocks the loop for
    # tens of milliseconds, which would count in the other clients' latencies
    sessions = [httpx.AsyncClient(base_url=base, timeout=600) for _ in range(clients)]
    probe = asyncio.create_task(prober(httpx.AsyncClient(base_url=base, timeout=10), stop, health))
    rngs = [random.Random(seed * 1000 + i) for i in range(clients)]
    t0 = time.perf_counter()
    await asyncio.gather(*(client_loop(sessions[i], model, n_requests, max_tokens, stats, rngs[i], corpus,
                                       max_prompt_tokens, vary) for i in range(clients)))
    wall = time.perf_counter() - t0
    stop.set()
    await probe
    for session in sessions:
        await session.aclose()
    return {"requests_s": stats.requests / wall, "tokens_s": stats.tokens / wall, "wall_s": wall,
            "ttft_p50": percentile(stats.ttft, 50), "ttft_p99": percentile(stats.ttft, 99),
            "itl_p50": percentile(stats.itl, 50), "itl_p99": percentile(stats.itl, 99),
            "itl_max": max(stats.itl, default=float("nan")),
            "failed": len(stats.failed), "lost": clients * n_requests - stats.requests - len(stats.failed),
            "healthz_p50": percentile(health, 50), "healthz_p99": percentile(health, 99), "healthz_n": len(health),
            "errors": stats.failed[:3]}


def mixed_cases(model, count, max_tokens_cap, rng, corpus):
    """(body bytes, expected status, expected completion tokens or None) for the mixed run."""
    valid_prompt = lambda: prompt_of(rng, corpus, rng.randint(1, 30))  # noqa: E731
    invalid = [
        lambda: (b"{not json", 400),
        lambda: (b"\xff\xfe\x00", 400),
        lambda: (json.dumps({"model": model, "prompt": "a", "max_tokens": -3}).encode(), 400),
        lambda: (json.dumps({"model": model, "prompt": "a", "max_tokens": max_tokens_cap + 1}).encode(), 400),
        lambda: (b'{"model": "%s", "prompt": "a", "temperature": NaN}' % model.encode(), 400),
        lambda: (json.dumps({"model": model, "prompt": "a", "top_p": 0}).encode(), 400),
        lambda: (json.dumps({"model": model, "prompt": "a", "n": 3}).encode(), 400),
        lambda: (json.dumps({"model": model, "prompt": "a", "stop": ["x"] * 1000}).encode(), 400),
        lambda: (json.dumps({"model": model, "prompt": "x" * 100_000}).encode(), 400),
        lambda: (json.dumps({"model": model, "prompt": 12}).encode(), 400),
        lambda: (json.dumps({"model": "nope", "prompt": "a"}).encode(), 404),
        lambda: (b'{"model": "%s", "prompt": %s}' % (model.encode(), b"[" * 100_000 + b"]" * 100_000), 400),
        lambda: (json.dumps({"model": model, "prompt": "a" * 1_100_000}).encode(), 413),
    ]
    cases = []
    for i in range(count):
        if i % 2 == 0:
            n = rng.randint(1, 16)
            body = {"model": model, "prompt": valid_prompt(), "max_tokens": n, "seed": i, "stream": i % 4 == 0}
            cases.append((json.dumps(body).encode(), 200, n))
        else:
            body, status = invalid[(i // 2) % len(invalid)]()
            cases.append((body, status, None))
    return cases


async def mixed_run(base, cases, concurrency):
    """Every case sent; (failures, counts by outcome)."""
    failures, outcome = [], {"valid_ok": 0, "invalid_ok": 0}
    queue = asyncio.Queue()
    for c in cases:
        queue.put_nowait(c)

    async def worker():
        async with httpx.AsyncClient(base_url=base, timeout=600) as client:
            while not queue.empty():
                body, status, n = queue.get_nowait()
                try:
                    r = await client.post("/v1/completions", content=body,
                                          headers={"Content-Type": "application/json"})
                except httpx.HTTPError as e:
                    failures.append(f"lost: {type(e).__name__}: {e}")
                    continue
                if r.status_code != status:
                    failures.append(f"expected {status}, got {r.status_code}: {r.text[:200]}")
                elif status == 200:
                    if body.find(b'"stream": true') >= 0:
                        lines = [ln for ln in r.text.split("\n\n") if ln.startswith("data: {")]
                        got = sum(1 for ln in lines if json.loads(ln[6:])["choices"])
                        ok = r.text.rstrip().endswith("data: [DONE]") and got <= n and got >= 1
                    else:
                        usage = r.json()["usage"]
                        ok = 1 <= usage["completion_tokens"] <= n
                    if ok:
                        outcome["valid_ok"] += 1
                    else:
                        failures.append(f"incomplete completion: {r.text[:200]}")
                else:
                    error = r.json().get("error", {})
                    if set(error) == {"message", "type", "param", "code"}:
                        outcome["invalid_ok"] += 1
                    else:
                        failures.append(f"not an OpenAI error body: {r.text[:200]}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return failures, outcome


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", help="a model directory (default: a random model saved to a temporary directory)")
    # GPT-2 small's shapes by default: the smallest model people serve, and one whose decode step
    # is bound by reading the weights, which batching shares (docs/decisions/serving.md).
    p.add_argument("--n-layer", type=int, default=12)
    p.add_argument("--n-head", type=int, default=12)
    p.add_argument("--n-embd", type=int, default=768)
    p.add_argument("--block-size", type=int, default=1024)
    p.add_argument("--vocab-size", type=int, default=50257,
                   help="the BPE vocabulary to train on the bundled corpus (it stops where merges run out)")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--requests", type=int, default=3, help="requests per client in each repeat")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--max-prompt-tokens", type=int, default=120)
    p.add_argument("--vary-tokens", action="store_true",
                   help="each request's max_tokens drawn from [max_tokens / 4, max_tokens]: the clients' requests "
                        "start and end at different steps, so new prompts arrive while other streams run")
    p.add_argument("--max-batch", type=int, default=8)
    p.add_argument("--prefill-rows", type=int, default=None,
                   help="the server's --prefill-rows (default: the server's default)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--mixed", type=int, default=1000, help="requests of the mixed run (0: skip it)")
    p.add_argument("--mixed-concurrency", type=int, default=16)
    args = p.parse_args()

    with open(CORPUS, encoding="utf-8") as f:
        corpus = f.read()
    tmp = tempfile.TemporaryDirectory(prefix="kael-serve-load-")
    model_dir = args.model or make_model(os.path.join(tmp.name, "bench-gpt"), args)
    model = os.path.basename(os.path.normpath(model_dir))
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(os.path.join(tmp.name, "server.log"), "wb")
    server = subprocess.Popen([sys.executable, "-m", "kael.serve", "--model", model_dir, "--port", str(port),
                               "--max-batch", str(args.max_batch), "--log-level", "warning",
                               *(["--prefill-rows", str(args.prefill_rows)] if args.prefill_rows else [])],
                              cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("kael.serve did not start")
            time.sleep(0.1)
        print(f"model {model}: {cfg['n_layer']} layers, width {cfg['n_embd']}, vocab {cfg['vocab_size']}, "
              f"context {cfg['n_positions']}; server pid {server.pid}, --max-batch {args.max_batch}, "
              f"--prefill-rows {args.prefill_rows or 'default'}; "
              f"{args.clients} clients x {args.requests} requests x {'up to ' if args.vary_tokens else ''}"
              f"{args.max_tokens} tokens, prompts of 1-"
              f"{args.max_prompt_tokens} tokens", flush=True)
        asyncio.run(run_clients(base, model, 1, 1, 8, corpus, 10, 99))  # warm-up
        singles, multis = [], []
        for rep in range(args.repeats):
            single = asyncio.run(run_clients(base, model, 1, args.requests, args.max_tokens, corpus,
                                             args.max_prompt_tokens, rep, args.vary_tokens))
            multi = asyncio.run(run_clients(base, model, args.clients, args.requests, args.max_tokens, corpus,
                                            args.max_prompt_tokens, 100 + rep, args.vary_tokens))
            singles.append(single)
            multis.append(multi)
            for name, r in (("1 client", single), (f"{args.clients} clients", multi)):
                print(f"  repeat {rep + 1} {name:>10}: {r['requests_s']:.2f} req/s, {r['tokens_s']:.1f} tokens/s, "
                      f"TTFT p50/p99 {r['ttft_p50'] * 1e3:.0f}/{r['ttft_p99'] * 1e3:.0f} ms, inter-token p50/p99/max "
                      f"{r['itl_p50'] * 1e3:.1f}/{r['itl_p99'] * 1e3:.1f}/{r['itl_max'] * 1e3:.0f} ms, /healthz p50/p99 "
                      f"{r['healthz_p50'] * 1e3:.1f}/{r['healthz_p99'] * 1e3:.1f} ms ({r['healthz_n']}), "
                      f"failed {r['failed']}, lost {r['lost']} {r['errors'] or ''}", flush=True)
        med = lambda rs, k: statistics.median(r[k] for r in rs)  # noqa: E731
        print(f"median of {args.repeats}:")
        for name, rs in (("1 client", singles), (f"{args.clients} clients", multis)):
            print(f"  {name:>10}: {med(rs, 'requests_s'):.2f} req/s, {med(rs, 'tokens_s'):.1f} tokens/s, TTFT p50/p99 "
                  f"{med(rs, 'ttft_p50') * 1e3:.0f}/{med(rs, 'ttft_p99') * 1e3:.0f} ms, inter-token p50/p99/max "
                  f"{med(rs, 'itl_p50') * 1e3:.1f}/{med(rs, 'itl_p99') * 1e3:.1f}/{med(rs, 'itl_max') * 1e3:.0f} ms, "
                  f"/healthz p50/p99 "
                  f"{med(rs, 'healthz_p50') * 1e3:.1f}/{med(rs, 'healthz_p99') * 1e3:.1f} ms, "
                  f"failed {sum(r['failed'] for r in rs)}, lost {sum(r['lost'] for r in rs)}")
        ratio = med(multis, "tokens_s") / med(singles, "tokens_s")
        print(f"  aggregate tokens/s, {args.clients} clients / 1 client: {ratio:.2f}x (target >= 4x); "
              f"/healthz p99 under load {med(multis, 'healthz_p99') * 1e3:.1f} ms (target < 50 ms)")
        if args.mixed:
            rng = random.Random(7)
            cases = mixed_cases(model, args.mixed, 512, rng, corpus)
            rss0 = rss_kib(server.pid)
            t0 = time.perf_counter()
            half = len(cases) // 2
            failures, outcome = asyncio.run(mixed_run(base, cases[:half], args.mixed_concurrency))
            rss_half = rss_kib(server.pid)
            failures2, outcome2 = asyncio.run(mixed_run(base, cases[half:], args.mixed_concurrency))
            failures += failures2
            outcome = {k: outcome[k] + outcome2[k] for k in outcome}
            wall = time.perf_counter() - t0
            rss1 = rss_kib(server.pid)
            health = httpx.get(base + "/healthz").json()
            print(f"mixed run: {len(cases)} requests ({sum(c[1] == 200 for c in cases)} valid) in {wall:.1f} s, "
                  f"{args.mixed_concurrency} at a time: {outcome['valid_ok']} valid completed, "
                  f"{outcome['invalid_ok']} invalid refused with their 4xx, {len(failures)} failed or lost; "
                  f"server RSS {rss0 / 1024:.1f} MiB at the start, {rss_half / 1024:.1f} MiB halfway, "
                  f"{rss1 / 1024:.1f} MiB at the end; "
                  f"afterwards active {health['active']}, queued {health['queued']}")
            for f in failures[:5]:
                print("  ", f)
    finally:
        server.terminate()
        status = server.wait(60)
        log.close()
        print(f"server exit status after SIGTERM: {status}")
        tmp.cleanup()


if __name__ == "__main__":
    main()
