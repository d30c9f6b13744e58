"""kael.distributed under real mpirun: every collective and dtype with 2 and 4 ranks against
NumPy (dist_worker_collectives.py), async works in issue order, objects, sub-groups; errors:
calls before init, mismatched shapes/dtypes/collectives, a rank that raises, a rank that skips a
collective (the timeout), a killed rank (dist_worker_errors.py)."""
import pytest

import kael.distributed as dist
from mpi_launch import run_mpi



def test_is_available_and_calls_before_init_raise():
    assert dist.is_available(), "kael was built without MPI although mpirun is installed (install libopenmpi-dev)"
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.all_reduce(None)
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.get_world_size()
    with pytest.raises(ValueError, match="not supported"):
        dist.init_process_group("nccl")


@pytest.mark.parametrize("nproc", [2, 4])
def test_every_collective_and_dtype_matches_numpy(nproc):
    rc, out, _ = run_mpi(nproc, "dist_worker_collectives.py", nproc)
    assert rc == 0, out
    for r in range(nproc):
        assert f"rank {r}: ok" in out, out


def test_before_init_under_mpirun():
    rc, out, _ = run_mpi(2, "dist_worker_errors.py", "before_init")
    assert rc == 0 and out.count("before_init ok") == 2, out


@pytest.mark.parametrize("mode,lines", [
    ("mismatch_shape", ["rank 0: float32 [4, 3] op=SUM", "rank 1: float32 [5] op=SUM"]),
    ("mismatch_dtype", ["rank 0: float32 [4] op=SUM", "rank 1: float64 [4] op=SUM"]),
])
def test_mismatch_raises_on_every_rank_naming_it(mode, lines):
    rc, out, _ = run_mpi(2, "dist_worker_errors.py", mode)
    assert rc == 0, out
    for r in range(2):
        assert f"rank {r} caught: all_reduce: the ranks of the group disagree" in out, out
        assert f"rank {r} recovered" in out, out
    for line in lines:
        assert out.count(line) == 2, out


def test_different_collectives_raise_on_every_rank():
    rc, out, _ = run_mpi(2, "dist_worker_errors.py", "mismatch_collective")
    assert rc == 0, out
    assert "rank 0 caught: all_reduce" in out and "rank 1 caught: broadcast" in out, out
    assert "called a different collective" in out, out


def test_a_rank_that_raises_ends_the_job():
    rc, out, secs = run_mpi(2, "dist_worker_errors.py", "raise", timeout=60)
    assert rc != 0, out
    assert "ValueError: rank 1 fails on purpose" in out and "rank 1 raised ValueError; aborting the job" in out, out
    assert "should not get here" not in out, out
    assert secs < 30, secs


def test_a_rank_that_skips_a_collective_times_out_the_others():
    rc, out, secs = run_mpi(2, "dist_worker_errors.py", "skip", timeout=60, env={"DIST_TEST_TIMEOUT": "3"})
    assert rc != 0, out
    assert "rank 0 timed out after 3." in out, out
    assert "RuntimeError: all_reduce: timed out after 3000 ms" in out, out
    assert secs < 30, secs  # rank 1 sleeps 60 s: the job ended because rank 0 gave up


def test_a_rank_that_exits_early_times_out_the_others():
    rc, out, secs = run_mpi(2, "dist_worker_errors.py", "exit", timeout=60, env={"DIST_TEST_TIMEOUT": "3"})
    assert rc != 0, out
    assert "RuntimeError: all_reduce: timed out after 3000 ms" in out, out
    assert "should not get here" not in out, out
    assert secs < 30, secs


def test_a_killed_rank_ends_the_job():
    rc, out, secs = run_mpi(2, "dist_worker_errors.py", "kill", timeout=60)
    assert rc != 0, out
    assert "exited on signal 9" in out, out
    assert "should not get here" not in out, out
    assert secs < 30, secs


def test_views_empty_scalar_tensors_and_bad_arguments():
    rc, out, _ = run_mpi(2, "dist_worker_errors.py", "edges")
    assert rc == 0 and out.count("edges ok") == 2, out


def test_check_can_be_turned_off():
    rc, out, _ = run_mpi(2, "dist_worker_errors.py", "check_off", env={"KAEL_DISTRIBUTED_CHECK": "0"})
    assert rc == 0 and out.count("check_off ok") == 2, out


def test_without_mpi_init_raises_a_clear_error(monkeypatch):
    from kael import _C
    monkeypatch.setattr(_C, "_dist_is_available", lambda: False)
    assert not dist.is_available()
    with pytest.raises(RuntimeError, match="built without MPI"):
        dist.init_process_group("mpi")


def test_c10d_module_and_torch_names():
    import kael.distributed.distributed_c10d as c10d
    assert c10d.all_reduce is dist.all_reduce and c10d.ProcessGroup is dist.ProcessGroup
    assert [op.name for op in dist.ReduceOp] == ["SUM", "AVG", "PRODUCT", "MIN", "MAX"]


def test_a_tensor_resized_while_its_collective_runs_keeps_the_memory_alive():
    """The work holds an alias of each tensor: `t.data = ...` on the caller's tensor (another
    thread's, while the collective runs without the GIL) swaps that tensor's storage, not MPI's.
    A subprocess, as a use-after-free would crash it (and ASan reports it)."""
    import subprocess
    import sys
    code = ("import kael, kael.distributed as d\n"
            "d.init_process_group()\n"
            "for _ in range(20):\n"
            "    t = kael.ones(1 << 18); w = d.all_reduce(t, async_op=True); t.data = kael.zeros(0); w.wait()\n"
            "    r = kael.zeros(1 << 16); rw = d.irecv(r, src=0); sw = d.isend(kael.ones(1 << 16), dst=0)\n"
            "    r.data = kael.zeros(1); sw.wait(); rw.wait()\n"
            "print('ok', t.shape, r.shape)\n")
    p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout
    assert "ok kael.Size([0]) kael.Size([1])" in p.stdout, p.stdout


def test_one_process_without_mpirun():
    """python train.py, no mpirun: MPI's singleton start, a world of one rank."""
    import subprocess
    import sys
    code = ("import kael, kael.distributed as d\n"
            "from kael.nn.parallel import DistributedDataParallel as DDP\n"
            "d.init_process_group()\n"
            "t = kael.ones(3); d.all_reduce(t, op=d.ReduceOp.AVG)\n"
            "m = DDP(kael.nn.Linear(3, 2)); m(kael.ones(4, 3)).sum().backward()\n"
            "print(d.get_rank(), d.get_world_size(), t.tolist(), m.module.weight.grad.tolist()[0])\n")
    p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout
    assert "0 1 [1.0, 1.0, 1.0] [4.0, 4.0, 4.0]" in p.stdout, p.stdout
