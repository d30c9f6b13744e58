"""kael.distributed's speed (docs/performance.md, "Distributed").

    .venv/bin/python tools/bench/distributed.py allreduce   # all_reduce bus bandwidth vs Open MPI's MPI_Allreduce
    .venv/bin/python tools/bench/distributed.py ddp         # DDP samples/s, 2 ranks vs 1, exposed communication
    .venv/bin/python tools/bench/distributed.py all --repeats 3

allreduce: float32 sum all-reduce of 1 KB to 256 MB with 2 ranks, kael (the agreement check on,
the default, and off) against a C program calling MPI_Allreduce (compiled with mpicc into a temp
dir) on the same sizes, iterations and MCA settings, in a plain loop and handing each call to a
worker thread as kael's communication thread does (on a loaded machine the two differ a lot). Bus bandwidth = bytes / time * 2(n-1)/n
(NCCL's convention). Each row is the median of --repeats runs, the runs alternating between
the implementations.

ddp: a GPT-shaped model of kael.nn (n_layer 4, n_head 4, n_embd 256, block 256, vocab 4096)
trained with SGD: 1 rank x 1 thread against 2 ranks x 1 thread (DistributedDataParallel), the
same batch per rank; samples/s (sequences), and the share of backward spent waiting for
gradient all-reduces after the last gradient (communication not hidden by backward).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
SIZES = [1 << k for k in range(10, 29, 2)]  # 1 KB .. 256 MB

# The same loop with each MPI_Allreduce handed to a worker thread and waited for, as kael's
# communication thread does (a condition variable each way).
C_PROGRAM_HANDOFF = r"""
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static float* g_buf; static int g_n; static int g_pending, g_done, g_stop;
static void* worker(void* arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&mu);
    while (!g_pending && !g_stop) pthread_cond_wait(&cv, &mu);
    if (g_stop) { pthread_mutex_unlock(&mu); return NULL; }
    g_pending = 0;
    pthread_mutex_unlock(&mu);
    MPI_Allreduce(MPI_IN_PLACE, g_buf, g_n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    pthread_mutex_lock(&mu);
    g_done = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
  }
}
static void allreduce(void) {
  pthread_mutex_lock(&mu);
  g_pending = 1; g_done = 0;
  pthread_cond_broadcast(&cv);
  while (!g_done) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
}
int main(int argc, char** argv) {
  int provided, rank;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  pthread_t t;
  pthread_create(&t, NULL, worker, NULL);
  for (int a = 1; a < argc; a += 2) {
    long bytes = atol(argv[a]);
    int iters = atoi(argv[a + 1]);
    g_n = (int)(bytes / 4);
    g_buf = malloc(bytes);
    for (long i = 0; i < g_n; ++i) g_buf[i] = 1.0f;
    allreduce();  /* warm-up */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) allreduce();
    MPI_Barrier(MPI_COMM_WORLD);
    double dt = (MPI_Wtime() - t0) / iters;
    if (rank == 0) printf("%ld %.9f\n", bytes, dt);
    fflush(stdout);
    free(g_buf);
  }
  pthread_mutex_lock(&mu); g_stop = 1; pthread_cond_broadcast(&cv); pthread_mutex_unlock(&mu);
  pthread_join(t, NULL);
  MPI_Finalize();
  return 0;
}
"""

C_PROGRAM = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int a = 1; a < argc; a += 2) {
    long bytes = atol(argv[a]);
    int iters = atoi(argv[a + 1]);
    long n = bytes / 4;
    float* buf = malloc(bytes);
    for (long i = 0; i < n; ++i) buf[i] = 1.0f;
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);  /* warm-up */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t = (MPI_Wtime() - t0) / iters;
    if (rank == 0) printf("%ld %.9f\n", bytes, t);
    fflush(stdout);
    free(buf);
  }
  MPI_Finalize();
  return 0;
}
"""


def iters_for(nbytes):
    return max(5, min(2000, int(512e6 / nbytes)))


def mpi_env():
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", KAEL_NUM_THREADS="1",
               OMP_NUM_THREADS="1", OMPI_MCA_btl="self,vader", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return env


def mpirun(nproc, cmd, env=None, timeout=900):
    full = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(nproc)] + cmd
    p = subprocess.run(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or mpi_env(),
                       timeout=timeout)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(full)} failed:\n{p.stdout}\n{p.stderr}")
    return p.stdout


def parse_times(out):
    times = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit():
            times[int(parts[0])] = float(parts[1])
    return times


# ---------------------------------------------------------------- workers (one rank each)
def worker_allreduce():
    import kael
    import kael.distributed as dist
    dist.init_process_group("mpi")
    for nbytes in SIZES:
        t = kael.ones(nbytes // 4)
        iters = iters_for(nbytes)
        dist.all_reduce(t)  # warm-up
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        dist.barrier()
        dt = (time.perf_counter() - t0) / iters
        if dist.get_rank() == 0:
            print(f"{nbytes} {dt:.9f}", flush=True)
    dist.destroy_process_group()


def gpt_model(vocab=4096, block=256, n_layer=4, n_head=4, n_embd=256):
    import kael
    import kael.nn as nn
    import kael.nn.functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(n_embd)
            self.qkv = nn.Linear(n_embd, 3 * n_embd)
            self.proj = nn.Linear(n_embd, n_embd)
            self.ln2 = nn.LayerNorm(n_embd)
            self.fc = nn.Linear(n_embd, 4 * n_embd)
            self.out = nn.Linear(4 * n_embd, n_embd)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(n_embd, dim=2)
            q, k, v = (z.view(b, t, n_head, c // n_head).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, n_embd)
            self.wpe = nn.Embedding(block, n_embd)
            self.blocks = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.head = nn.Linear(n_embd, vocab, bias=False)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(kael.arange(idx.shape[1]))
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln_f(x))

    return GPT()


def worker_ddp(batch, steps, warmup):
    import kael
    import kael.distributed as dist
    import kael.nn.functional as F
    from kael.nn.parallel import DistributedDataParallel as DDP
    kael.set_num_threads(1)
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    kael.manual_seed(0)
    model = gpt_model()
    nparams = sum(p.numel() for p in model.parameters())
    ddp = DDP(model) if world > 1 else None
    run = ddp if ddp is not None else model
    opt = kael.optim.SGD(model.parameters(), lr=1e-3)
    g = kael.Generator()
    g.manual_seed(rank)
    bw, waits, total = [], [], []
    for step in range(warmup + steps):
        idx = kael.randint(0, 4096, (batch, 257), generator=g)
        t0 = time.perf_counter()
        opt.zero_grad()
        logits = run(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 4096), idx[:, 1:].reshape(-1))
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        if step >= warmup:
            bw.append(t2 - t1)
            total.append(t3 - t0)
            waits.append(ddp._last_wait_s if ddp is not None else 0.0)
    if rank == 0:
        step_s = statistics.median(total)
        print(f"RESULT world={world} params={nparams} batch={batch} step_s={step_s:.4f} "
              f"samples_s={world * batch / step_s:.3f} backward_s={statistics.median(bw):.4f} "
              f"exposed_wait_s={statistics.median(waits):.4f} "
              f"exposed_share={statistics.median(w / b for w, b in zip(waits, bw)):.4f}", flush=True)
    dist.destroy_process_group()


# ---------------------------------------------------------------- orchestration
def bench_allreduce(repeats):
    if shutil.which("mpicc") is None:
        raise SystemExit("mpicc not found (libopenmpi-dev)")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "allreduce.c"), os.path.join(tmp, "allreduce")
        with open(src, "w") as f:
            f.write(C_PROGRAM)
        subprocess.run(["mpicc", "-O2", "-o", exe, src], check=True)
        src2, exe2 = os.path.join(tmp, "allreduce_handoff.c"), os.path.join(tmp, "allreduce_handoff")
        with open(src2, "w") as f:
            f.write(C_PROGRAM_HANDOFF)
        subprocess.run(["mpicc", "-O2", "-pthread", "-o", exe2, src2], check=True)
        args = [str(a) for s in SIZES for a in (s, iters_for(s))]
        runs = {"mpi": [], "mpi_handoff": [], "kael": [], "kael_nocheck": []}
        for _ in range(repeats):
            runs["mpi"].append(parse_times(mpirun(2, [exe] + args)))
            runs["mpi_handoff"].append(parse_times(mpirun(2, [exe2] + args)))
            runs["kael"].append(parse_times(mpirun(2, [sys.executable, HERE, "--worker", "allreduce"])))
            env = dict(mpi_env(), KAEL_DISTRIBUTED_CHECK="0")
            runs["kael_nocheck"].append(parse_times(mpirun(2, [sys.executable, HERE, "--worker", "allreduce"], env)))
    busbw = lambda nbytes, t: nbytes / t * 2 * (2 - 1) / 2 / 1e9  # noqa: E731
    print("| size | MPI_Allreduce GB/s | MPI_Allreduce, hand-off GB/s | kael GB/s (check on) | ratio | ratio to "
          "hand-off | kael GB/s (check off) | ratio | ratio to hand-off |")
    print("|---|---|---|---|---|---|---|---|---|")
    for s in SIZES:
        med = {k: statistics.median(r[s] for r in v) for k, v in runs.items()}
        m, h = busbw(s, med["mpi"]), busbw(s, med["mpi_handoff"])
        k, kn = busbw(s, med["kael"]), busbw(s, med["kael_nocheck"])
        label = f"{s // 1024} KB" if s < 1 << 20 else f"{s >> 20} MB"
        print(f"| {label} | {m:.3f} | {h:.3f} | {k:.3f} | {k / m:.2f} | {k / h:.2f} | {kn:.3f} | {kn / m:.2f} | "
              f"{kn / h:.2f} |", flush=True)


def bench_ddp(repeats, batch, steps, warmup):
    res = {1: [], 2: []}
    for _ in range(repeats):
        for world in (1, 2):
            out = mpirun(world, [sys.executable, HERE, "--worker", "ddp", "--batch", str(batch), "--steps", str(steps),
                                 "--warmup", str(warmup)])
            line = next(x for x in out.splitlines() if x.startswith("RESULT"))
            res[world].append(dict(kv.split("=") for kv in line.split()[1:]))
    print("| ranks x threads | params | batch/rank | step s | samples/s | backward s | exposed comm s | "
          "exposed share of backward |")
    print("|---|---|---|---|---|---|---|---|")
    med = {}
    for world, rs in res.items():
        m = {k: statistics.median(float(r[k]) for r in rs) for k in ("step_s", "samples_s", "backward_s",
                                                                       "exposed_wait_s", "exposed_share")}
        med[world] = m
        print(f"| {world} x 1 | {rs[0]['params']} | {batch} | {m['step_s']:.3f} | {m['samples_s']:.2f} | "
              f"{m['backward_s']:.3f} | {m['exposed_wait_s']:.4f} | {100 * m['exposed_share']:.1f}% |")
    print(f"speed-up 2 ranks / 1 rank: {med[2]['samples_s'] / med[1]['samples_s']:.2f}x")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", nargs="?", default="all", choices=["allreduce", "ddp", "all"])
    p.add_argument("--worker", choices=["allreduce", "ddp"], help=argparse.SUPPRESS)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch", type=int, default=4, help="sequences per rank and step (ddp)")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2)
    a = p.parse_args()
    if a.worker == "allreduce":
        return worker_allreduce()
    if a.worker == "ddp":
        return worker_ddp(a.batch, a.steps, a.warmup)
    with open("/proc/loadavg") as f:
        print(f"load average before: {f.read().split()[:3]}")
    if a.what in ("allreduce", "all"):
        bench_allreduce(a.repeats)
    if a.what in ("ddp", "all"):
        bench_ddp(a.repeats, a.batch, a.steps, a.warmup)
    with open("/proc/loadavg") as f:
        print(f"load average after: {f.read().split()[:3]}")


if __name__ == "__main__":
    main()
