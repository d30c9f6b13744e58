"""kael.BpeTokenizer vs tiktoken on the bundled corpus (kael/data/tinyshakespeare.txt), GPT-2's ranks.

    .venv/bin/python tools/bench/tokenizer.py              # ~1 minute
    .venv/bin/python tools/bench/tokenizer.py --quick      # fewer repeats
    .venv/bin/python tools/bench/tokenizer.py --markdown   # the table for docs/performance.md

Rows (MB/s of UTF-8 input, median of the repeats, both libraries timed alternately):
  - encode, 1 thread: encode() of the whole corpus as one string;
  - encode per line, 1 thread: encode() of each of its lines in a Python loop (call overhead included);
  - encode_batch, 2 threads: encode_batch() of the lines, and of 64 KiB chunks, num_threads=2;
  - decode, 1 thread: decode() of the corpus's ids.
Then the time kael takes to train a vocabulary of 1,000 on the corpus (tiktoken has no trainer).
GPT-2's ranks come from the openai-whisper sdist (test/python/gpt2_assets.py fetches and caches them).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "test" / "python"))

import kael  # noqa: E402
from gpt2_assets import CORPUS, gpt2_tiktoken_path, tiktoken_gpt2  # noqa: E402


def timed(fn, repeats):
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    repeats = 3 if args.quick else 9

    import tiktoken
    path = gpt2_tiktoken_path()
    tok = kael.BpeTokenizer.from_tiktoken(path)
    enc = tiktoken_gpt2(path)
    text = CORPUS.read_text(encoding="utf-8")
    mb = len(text.encode("utf-8")) / 1e6
    lines = text.splitlines(keepends=True)
    chunks = [text[i:i + 65536] for i in range(0, len(text), 65536)]
    ids = enc.encode(text)
    assert tok.encode(text) == ids and tok.encode_batch(lines, num_threads=2) == enc.encode_batch(lines, num_threads=2)

    cases = [
        ("encode, 1 thread", lambda: tok.encode(text), lambda: enc.encode(text)),
        ("encode per line, 1 thread", lambda: [tok.encode(s) for s in lines], lambda: [enc.encode(s) for s in lines]),
        ("encode_batch lines, 2 threads", lambda: tok.encode_batch(lines, num_threads=2),
         lambda: enc.encode_batch(lines, num_threads=2)),
        ("encode_batch 64 KiB chunks, 2 threads", lambda: tok.encode_batch(chunks, num_threads=2),
         lambda: enc.encode_batch(chunks, num_threads=2)),
        ("decode, 1 thread", lambda: tok.decode(ids), lambda: enc.decode(ids)),
    ]
    rows = []
    for name, ours, theirs in cases:
        k = []
        t = []
        for _ in range(repeats):  # alternate, so that load on the machine hits both alike
            k.append(timed(ours, 1))
            t.append(timed(theirs, 1))
        rows.append((name, mb / statistics.median(k), mb / statistics.median(t)))
    t_train = timed(lambda: kael.BpeTokenizer.train(text, 1000, special_tokens=["<|endoftext|>"]),
                    1 if args.quick else 3)

    print(f"corpus: {CORPUS.name}, {mb:.3f} MB, {len(lines)} lines, {len(ids)} GPT-2 tokens; "
          f"tiktoken {tiktoken.__version__}")
    if args.markdown:
        print("| case | kael MB/s | tiktoken MB/s | kael / tiktoken |")
        print("| --- | ---: | ---: | ---: |")
        for name, k, t in rows:
            print(f"| {name} | {k:.1f} | {t:.1f} | {k / t:.2f}x |")
        print(f"\nTraining a vocabulary of 1,000 on the corpus: {t_train:.2f} s (kael).")
    else:
        print(f"{'case':40s} {'kael MB/s':>10s} {'tiktoken MB/s':>14s} {'ratio':>8s}")
        for name, k, t in rows:
            print(f"{name:40s} {k:10.1f} {t:14.1f} {k / t:7.2f}x")
        print(f"train vocab_size=1000: {t_train:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
