"""Save and load of a ~500 MB set of tensors: kael vs safetensors.torch, side by side.

    .venv/bin/python tools/bench/safetensors_io.py [--mb 500] [--repeats 5] [--dir DIR]

The set mixes sizes and dtypes as a model checkpoint does (a few large float32 matrices, many
middle-sized ones, bf16 and int64 tensors, small biases). Each library saves the same values
(kael.save_safetensors vs safetensors.torch.save_file) and loads the file it wrote
(kael.load_safetensors vs safetensors.torch.load_file), from the page cache (the files were
just written); kael's mmap=True load is timed on its own. Each time is the median of
--repeats runs, round-robin; throughput counts the tensor bytes. The files are byte-identical
(checked), so the two libraries move exactly the same data.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import safetensors
import safetensors.torch
import torch

import kael


def build_set(total_mb):
    """{name: torch tensor} of about total_mb megabytes."""
    torch.manual_seed(0)
    out = {}
    budget = total_mb << 20
    i = 0
    while budget > 0:
        kind = i % 8
        if kind == 0:
            t = torch.randn(4096, 4096)                              # 64 MB float32
        elif kind in (1, 2, 3):
            t = torch.randn(1024, 2048)                              # 8 MB float32
        elif kind == 4:
            t = torch.randn(1024, 1024).to(torch.bfloat16)           # 2 MB bf16
        elif kind == 5:
            t = torch.randint(0, 50000, (256, 1024))                 # 2 MB int64
        else:
            t = torch.randn(4096)                                    # 16 KB bias
        nbytes = t.numel() * t.element_size()
        if nbytes > budget and kind == 0:
            i += 1
            continue
        out[f"layer{i // 8}.param{kind}"] = t
        budget -= nbytes
        i += 1
    return out


def to_kael(t):
    if t.dtype == torch.bfloat16:
        return kael.frombuffer(bytearray(t.view(torch.int16).numpy().tobytes()), dtype=kael.bfloat16).reshape(
            *t.shape).clone()
    return kael.tensor(t.numpy())


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dir", default=None, help="where to write the files (default: a temporary directory)")
    args = parser.parse_args()

    tensors = build_set(args.mb)
    ktensors = {n: to_kael(t) for n, t in tensors.items()}
    nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
    print(f"{len(tensors)} tensors, {nbytes / 1e6:.0f} MB; safetensors {safetensors.__version__}, "
          f"torch {torch.__version__}, {os.cpu_count()} CPUs")

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        kpath, tpath = os.path.join(tmp, "kael.safetensors"), os.path.join(tmp, "torch.safetensors")
        times = {k: [] for k in ("kael save", "torch save", "kael load", "torch load", "kael mmap")}
        for _ in range(args.repeats):
            times["kael save"].append(timed(lambda: kael.save_safetensors(ktensors, kpath))[0])
            times["torch save"].append(timed(lambda: safetensors.torch.save_file(tensors, tpath))[0])
            t, loaded = timed(lambda: kael.load_safetensors(kpath))
            times["kael load"].append(t)
            del loaded
            t, loaded = timed(lambda: safetensors.torch.load_file(tpath))
            times["torch load"].append(t)
            del loaded
        with open(kpath, "rb") as a, open(tpath, "rb") as b:
            assert a.read() == b.read(), "the two files differ"
        mmap_times = []
        for _ in range(max(20, args.repeats)):
            t, loaded = timed(lambda: kael.load_safetensors(kpath, mmap=True))
            mmap_times.append(t)
            del loaded
        times["kael mmap"] = mmap_times

    med = {k: statistics.median(v) for k, v in times.items()}
    print()
    print("| operation | kael | safetensors.torch | kael / torch throughput |")
    print("|---|---|---|---|")
    for op in ("save", "load"):
        k, t = med[f"kael {op}"], med[f"torch {op}"]
        print(f"| {op} ({nbytes / 1e6:.0f} MB) | {k * 1e3:.0f} ms ({nbytes / k / 1e9:.2f} GB/s) | "
              f"{t * 1e3:.0f} ms ({nbytes / t / 1e9:.2f} GB/s) | {t / k:.2f}x |")
    print(f"| load, mmap=True | {med['kael mmap'] * 1e3:.2f} ms | - | - |")
    print(f"\nmedians of {args.repeats} runs (mmap: {len(mmap_times)}); all runs (s):")
    for k, v in times.items():
        print(f"  {k}: " + " ".join(f"{x:.4f}" for x in v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
