"""Plain against streaming stores, by output size (Note [Streaming stores] in kael/native/loops.h).

For each output size it times a + b, exp(a) and log(a) (a formula that computes more per element,
with no SIMD form) into a preallocated float32 output, and a + b and exp followed by a sum of the
output (the chain, where a streamed output has left the caches before the
sum reads it). Each configuration runs in its own process with KAEL_STREAMING_STORES=0 (plain
stores) or =1 (streaming stores for every output), the two alternating --runs times; each cell is
the median over the runs of the median of --repeats calls, in GB/s (the bytes the op must move:
12 per element for a + b, 8 for exp and log, 4 more for the sum).

    .venv/bin/python tools/bench/streaming.py [--threads 1,2] [--sizes 8,16,32] [--runs 2]

Sizes are in M float32 elements (16 = a 64 MB output). Where streaming wins on the ops alone and
loses in the chains, the output still fits in the cache the machine gives this process.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CASES = ("a + b", "exp", "log", "a + b, sum", "exp, sum")


def child(threads, sizes, repeats):
    import kael

    kael.set_num_threads(threads)

    def median_time(f):
        f()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            f()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    rates = {}
    for m in sizes:
        n = m * 2**20
        a, b, out = kael.randn(n), kael.randn(n), kael.empty(n)
        positive = a.abs() + 0.5
        ops = {"a + b": (lambda: kael.add(a, b, out=out), 12),
               "exp": (lambda: kael.exp(a, out=out), 8),
               "log": (lambda: kael.log(positive, out=out), 8),
               "a + b, sum": (lambda: kael.add(a, b, out=out).sum(), 16),
               "exp, sum": (lambda: kael.exp(a, out=out).sum(), 12)}
        for case, (f, per) in ops.items():
            rates[f"{m}/{case}"] = per * n / median_time(f) / 1e9
        del a, b, out, positive
    print(json.dumps(rates))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", default="1,2")
    p.add_argument("--sizes", default="8,16,32", help="output sizes in M float32 elements")
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.child:
        child(int(args.threads), sizes, args.repeats)
        return
    print(f"# streaming stores against plain stores, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"load average {os.getloadavg()[0]:.1f} at start; GB/s, median of {args.runs} runs")
    for threads in (int(t) for t in args.threads.split(",")):
        runs = {"0": [], "1": []}
        for _ in range(args.runs):
            for mode in ("0", "1"):
                env = dict(os.environ, KAEL_STREAMING_STORES=mode)
                out = subprocess.run([sys.executable, __file__, "--child", "--threads", str(threads),
                                      "--sizes", args.sizes, "--repeats", str(args.repeats)],
                                     env=env, check=True, capture_output=True, text=True).stdout
                runs[mode].append(json.loads(out))
        print(f"\n== {threads} thread(s): plain -> streaming")
        print(f"{'output':>8}  " + "  ".join(f"{c:>15}" for c in CASES))
        for m in sizes:
            cells = []
            for case in CASES:
                plain = statistics.median(r[f"{m}/{case}"] for r in runs["0"])
                streamed = statistics.median(r[f"{m}/{case}"] for r in runs["1"])
                cells.append(f"{plain:5.1f} -> {streamed:5.1f}")
            print(f"{m * 4:>5} MB  " + "  ".join(f"{c:>15}" for c in cells))


if __name__ == "__main__":
    main()
