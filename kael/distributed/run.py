"""python -m kael.distributed.run: start a kael.distributed program on N processes through
mpirun (torchrun's role; kael.distributed runs on MPI).

    python -m kael.distributed.run --nproc 4 train.py --lr 0.1
    python -m kael.distributed.run --nproc 8 --hostfile hosts train.py     # several machines
    python -m kael.distributed.run --nproc 2 -m mypackage.train

Each rank gets torchrun's environment variables (RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE) from Open MPI's. Root gets Open MPI's --allow-run-as-root. SIGINT and SIGTERM
are forwarded to mpirun, which forwards them to every rank; the exit status is mpirun's.
Plain `mpirun -np N python train.py` works as well (kael.distributed sets the same variables).
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m kael.distributed.run",
                                description="Run a kael.distributed program on N processes with mpirun.")
    p.add_argument("--nproc", "--nproc-per-node", "--nproc_per_node", dest="nproc", type=int, default=1,
                   help="number of processes (ranks) in all")
    p.add_argument("--hostfile", default=None, help="Open MPI hostfile: the machines and their slots")
    p.add_argument("--mpirun", default=None, help="the mpirun to use (default: the one on PATH)")
    p.add_argument("--mpirun-args", default="", help="more arguments for mpirun, one string (e.g. "
                   "\"--mca btl_tcp_if_include eth0\")")
    p.add_argument("-m", "--module", action="store_true", help="the program is a module (python -m)")
    p.add_argument("--no-python", action="store_true", help="run the program itself, not through python")
    p.add_argument("program", help="the script (or module with -m)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the program's arguments")
    a = p.parse_args(argv)
    if a.nproc < 1:
        p.error(f"--nproc must be at least 1, got {a.nproc}")
    return a


def command(a):
    mpirun = a.mpirun or shutil.which("mpirun")
    if mpirun is None:
        raise SystemExit("kael.distributed.run: mpirun not found: install Open MPI (openmpi-bin)")
    cmd = [mpirun, "-np", str(a.nproc)]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    if a.hostfile:
        cmd += ["--hostfile", a.hostfile]
    else:
        cmd.append("--oversubscribe")  # one machine: more ranks than cores is allowed
    for var in ("PYTHONPATH", "KAEL_NUM_THREADS", "OMP_NUM_THREADS", "KAEL_DISTRIBUTED_CHECK"):
        if var in os.environ:
            cmd += ["-x", var]  # to the other machines too
    cmd += a.mpirun_args.split()
    if a.no_python:
        cmd += [a.program]
    else:
        cmd += [sys.executable, "-m", "kael.distributed._bootstrap"] + (["-m"] if a.module else []) + [a.program]
    return cmd + list(a.args)


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    cmd = command(a)
    env = dict(os.environ)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    proc = subprocess.Popen(cmd, env=env)

    def forward(signum, _frame):
        if proc.poll() is None:
            proc.send_signal(signum)

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        rc = proc.wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    sys.exit(main())
