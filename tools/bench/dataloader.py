"""DataLoader throughput with worker threads (kael) and worker processes (torch).

The dataset is the kind workers exist for: each sample is read from a file (a 256 KB slice of one
.npy file on disk, read with a plain read per sample, as image or token shards are) and turned into
a tensor with some arithmetic: the 256 x 256 matrix of its floats times its transpose (34
MFLOP), normalised ((y - mean) / std). Batches of 32 samples; one
epoch of 512 samples per run, the median of --runs runs (wall clock), the first epoch of each loader
excluded (worker start-up for torch's processes is counted in each epoch, as each epoch starts them
unless persistent_workers).

    .venv/bin/python tools/bench/dataloader.py [--workers 0,1,2] [--runs 5]
"""
import argparse
import os
import statistics
import tempfile
import time

import numpy as np

SAMPLE = 64 * 1024  # float32 elements per sample
SAMPLES = 512


def make_dataset(lib, data, path):
    class Shards(data.Dataset):
        def __len__(self):
            return SAMPLES

        def __getitem__(self, i):
            with open(path, "rb") as f:
                f.seek(128 + i * SAMPLE * 4)  # past the .npy header
                raw = f.read(SAMPLE * 4)
            x = lib.frombuffer(bytearray(raw), dtype=lib.float32).reshape(256, 256)
            y = x @ x.T
            return (y - y.mean()) / (y.std() + 1e-6)
    return Shards()


def epoch_seconds(loader, runs):
    times = []
    for r in range(runs + 1):
        start = time.perf_counter()
        n = 0
        for batch in loader:
            n += batch.shape[0]
        assert n == SAMPLES
        if r:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="0,1,2")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    import kael
    import kael.data
    import torch
    import torch.utils.data
    torch.set_num_threads(1)
    kael.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "shard.npy")
        np.save(path, np.random.default_rng(0).standard_normal(SAMPLES * SAMPLE, dtype=np.float32))
        assert np.load(path, mmap_mode="r").offset == 128
        print(f"{SAMPLES} samples of {SAMPLE * 4 // 1024} KB read from a file, batches of 32, "
              f"median of {args.runs} epochs, ms per epoch (1 thread of compute per library)")
        print("| workers | kael (threads) ms | torch (processes) ms | torch/kael |")
        print("|---:|---:|---:|---:|")
        for w in [int(v) for v in args.workers.split(",")]:
            kl = kael.data.DataLoader(make_dataset(kael, kael.data, path), batch_size=32, num_workers=w)
            tl = torch.utils.data.DataLoader(make_dataset(torch, torch.utils.data, path), batch_size=32,
                                             num_workers=w)
            k, t = epoch_seconds(kl, args.runs), epoch_seconds(tl, args.runs)
            print(f"| {w} | {k * 1e3:.1f} | {t * 1e3:.1f} | {t / k:.2f}x |")


if __name__ == "__main__":
    main()
