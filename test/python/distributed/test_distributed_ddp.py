"""kael.nn.parallel.DistributedDataParallel under real mpirun (dist_worker_ddp.py): ranks each on
their part of every batch give the parameters (1e-6 relative) and gradients of one process on the
whole batch; buckets overlap backward; no_sync accumulation equals one larger batch; unused
parameters with and without find_unused_parameters as in torch."""
import pytest

from mpi_launch import run_mpi



@pytest.mark.parametrize("mode,nproc", [("train", 2), ("train", 4), ("small_buckets", 2), ("no_sync", 2),
                                        ("find_unused", 2), ("locally_unused", 2)])
def test_ddp_matches_one_process(mode, nproc):
    rc, out, _ = run_mpi(nproc, "dist_worker_ddp.py", mode)
    assert rc == 0, out
    for r in range(nproc):
        assert f"rank {r}: {mode} ok" in out, out


def test_unused_parameter_without_find_unused_raises_torchs_error():
    rc, out, _ = run_mpi(2, "dist_worker_ddp.py", "unused")
    assert rc == 0, out
    for r in range(2):
        assert f"rank {r}: unused error: Parameters which did not receive grad for rank {r}: unused.bias, " \
               "unused.weight" in out, out
