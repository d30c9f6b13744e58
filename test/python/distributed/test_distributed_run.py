"""python -m kael.distributed.run: N ranks of a torchrun-style program (RANK, WORLD_SIZE), its
arguments passed through, the exit status, SIGTERM and SIGINT forwarded to every rank; and plain
mpirun giving the same environment."""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from mpi_launch import HERE, run_mpi

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
WORKER = os.path.join(HERE, "dist_worker_launch.py")


def launcher_env():
    env = dict(os.environ, KAEL_NUM_THREADS="1", PYTHONUNBUFFERED="1", OMPI_MCA_btl="self,vader",
               OMPI_MCA_btl_vader_single_copy_mechanism="none")
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return env


def test_run_starts_n_ranks_with_torchrun_env_and_args():
    p = subprocess.run([sys.executable, "-m", "kael.distributed.run", "--nproc", "3", WORKER, "x", "--flag", "2"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120, env=launcher_env())
    assert p.returncode == 0, p.stdout
    for r in range(3):
        assert f"rank {r}/3 args=['x', '--flag', '2'] sum=3.0" in p.stdout, p.stdout


def test_run_returns_the_programs_failure():
    p = subprocess.run([sys.executable, "-m", "kael.distributed.run", "--nproc", "2", os.path.join(HERE, "nope.py")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120, env=launcher_env())
    assert p.returncode != 0, p.stdout


def test_plain_mpirun_sets_the_same_env():
    rc, out, _ = run_mpi(2, "dist_worker_launch.py", "plain")
    assert rc == 0, out
    assert "rank 1/2 args=['plain'] sum=1.0" in out, out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_run_forwards_signals_to_every_rank(sig):
    p = subprocess.Popen([sys.executable, "-m", "kael.distributed.run", "--nproc", "2", WORKER, "sleep"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=launcher_env())
    # mpirun forwards each rank's output as it comes: one rank's line may land inside the other's
    # (pid=31221rank 0 ready), so the words are found anywhere in the text, not line by line
    lines, pids, ready = [], [], 0
    deadline = time.monotonic() + 90
    while ready < 2 and time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        lines.append(line)
        text = "".join(lines)
        pids = [int(m) for m in re.findall(r"pid=(\d+)", text)]
        ready = len(re.findall(r"rank \d+ ready", text))
    assert ready == 2 and len(pids) == 2, "".join(lines)
    t0 = time.monotonic()
    p.send_signal(sig)
    rest, _ = p.communicate(timeout=60)
    assert time.monotonic() - t0 < 30
    assert p.returncode != 0, "".join(lines) + rest
    for pid in pids:  # every rank is gone (mpirun may reap them a moment after it exits)
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"rank process {pid} still runs after the launcher got signal {sig}")


def test_run_with_a_hostfile(tmp_path):
    """--hostfile (the several-machines form), with this machine as the one host."""
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost slots=2\n")
    p = subprocess.run([sys.executable, "-m", "kael.distributed.run", "--nproc", "2", "--hostfile", str(hosts),
                        "--mpirun-args", "--mca btl self,vader", WORKER, "h"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120, env=launcher_env())
    assert p.returncode == 0, p.stdout
    assert "rank 1/2 args=['h'] sum=1.0" in p.stdout, p.stdout
