"""Save and load of a ~500 MB set of tensors: kael vs safetensors.torch, side by side.

    .venv/bin/python tools/bench/safetensors_io.py [--mb 500] [--repeats 5] [--dir DIR]

The set mixes sizes and dtypes as a model checkpoint does (a few large float32 matrices, many
middle-sized ones, bf16 and int64 tensors, small biases). Each library saves the same values
(kael.save_safetensors vs safetensors.torch.save_file) and loads the file it wrote. The files
are byte-identical (checked), so both libraries move exactly the same data.

safetensors.torch.load_file returns tensors over a mapping of the file (nothing is read until
used), so the loads are compared in pairs that do the same work:
- into private memory: kael.load_safetensors(path) vs load_file(path) + clone() of each tensor;
- mapped: kael.load_safetensors(path, mmap=True) vs load_file(path).
The files go to /dev/shm by default (tmpfs: the libraries' own cost, not the disk's; a disk
shared with other work varies by 5x from run to run); --dir puts them elsewhere. Each time is
the median of --repeats runs, round-robin; throughput counts the tensor bytes.
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
    parser.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                        help="where to write the files (default: /dev/shm where it exists)")
    args = parser.parse_args()

    tensors = build_set(args.mb)
    ktensors = {n: to_kael(t) for n, t in tensors.items()}
    nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
    print(f"{len(tensors)} tensors, {nbytes / 1e6:.0f} MB; safetensors {safetensors.__version__}, "
          f"torch {torch.__version__}, {os.cpu_count()} CPUs")

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        kpath, tpath = os.path.join(tmp, "kael.safetensors"), os.path.join(tmp, "torch.safetensors")
        ops = ("kael save", "torch save", "kael load", "torch load + clone", "kael mmap", "torch load_file")
        times = {k: [] for k in ops}
        for _ in range(args.repeats):
            times["kael save"].append(timed(lambda: kael.save_safetensors(ktensors, kpath))[0])
            times["torch save"].append(timed(lambda: safetensors.torch.save_file(tensors, tpath))[0])
            t, loaded = timed(lambda: kael.load_safetensors(kpath))
            times["kael load"].append(t)
            del loaded
            t, loaded = timed(lambda: {k: v.clone() for k, v in safetensors.torch.load_file(tpath).items()})
            times["torch load + clone"].append(t)
            del loaded
        with open(kpath, "rb") as a, open(tpath, "rb") as b:
            assert a.read() == b.read(), "the two files differ"
        for _ in range(max(20, args.repeats)):
            t, loaded = timed(lambda: kael.load_safetensors(kpath, mmap=True))
            times["kael mmap"].append(t)
            del loaded
            t, loaded = timed(lambda: safetensors.torch.load_file(tpath))
            times["torch load_file"].append(t)
            del loaded

    med = {k: statistics.median(v) for k, v in times.items()}
    print()
    print("| operation | kael | safetensors.torch | kael / torch throughput |")
    print("|---|---|---|---|")
    rows = (("save", "kael save", "torch save"), ("load into memory", "kael load", "torch load + clone"),
            ("load mapped (mmap=True / load_file)", "kael mmap", "torch load_file"))
    for label, kk, tk in rows:
        k, t = med[kk], med[tk]
        print(f"| {label} ({nbytes / 1e6:.0f} MB) | {k * 1e3:.2f} ms ({nbytes / k / 1e9:.2f} GB/s) | "
              f"{t * 1e3:.2f} ms ({nbytes / t / 1e9:.2f} GB/s) | {t / k:.2f}x |")
    print(f"\nfiles in {args.dir or tempfile.gettempdir()}; medians of {args.repeats} runs (mapped loads: "
          f"{len(times['kael mmap'])}); all runs (s):")
    for k, v in times.items():
        print(f"  {k}: " + " ".join(f"{x:.4f}" for x in v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
