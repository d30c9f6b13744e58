"""Runs a worker script of this folder under real mpirun (the tests of kael.distributed)."""
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MPIRUN = shutil.which("mpirun")


def run_mpi(nproc, script, *args, timeout=180, env=None):
    """(returncode, output, seconds) of `mpirun -np nproc python script args...`; output is stdout
    and stderr together. The test command installs Open MPI (tools/setup_env.sh): without mpirun
    the tests fail, they are not skipped."""
    assert MPIRUN is not None, "mpirun not found: Open MPI's openmpi-bin (tools/setup_env.sh installs it)"
    full_env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                    KAEL_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
                    # the shared-memory transport only: the tests run on one machine, and probing
                    # network interfaces makes start-up slow in containers
                    OMPI_MCA_btl="self,vader", OMPI_MCA_btl_vader_single_copy_mechanism="none")
    full_env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.dirname(HERE)))] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    full_env.update(env or {})
    cmd = [MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", str(nproc), sys.executable,
           os.path.join(HERE, script), *map(str, args)]
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                       env=full_env, cwd=HERE)
    return p.returncode, p.stdout, time.monotonic() - t0
