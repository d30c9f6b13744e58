"""A torch DDP script runs on kael with only the library's name changed
(dist_worker_torch_script.py): the same lines on torch (gloo) and on kael (MPI), 2 ranks under
mpirun, give the same losses and the same trained parameters (state_dict keys `module.` ...)."""
import os
import socket

import numpy as np

from mpi_launch import run_mpi



def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torch_ddp_script_renamed_to_kael_trains_the_same(tmp_path):
    outs, losses = {}, {}
    for lib in ("torch", "kael"):
        out = tmp_path / f"{lib}.npz"
        # The oracle's run is tried twice: torch's gloo rank has been seen to abort at exit after a
        # complete run ("terminate called without an active exception", signal 6, on a loaded
        # machine). kael's run gets one try.
        for attempt in range(2 if lib == "torch" else 1):
            env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "GLOO_SOCKET_IFNAME": "lo"}
            rc, log, _ = run_mpi(2, "dist_worker_torch_script.py", lib, out, timeout=300, env=env)
            if rc == 0:
                break
        if lib == "torch" and rc != 0 and "terminate called without an active exception" in log \
                and out.exists() and len([ln for ln in log.splitlines() if ln.startswith("torch epoch")]) == 3:
            # both tries aborted at exit after a complete run (every epoch logged, the result
            # written): the oracle's numbers are whole, so they are compared; kael's run must exit 0
            rc = 0
        assert rc == 0, log
        losses[lib] = [line.split()[-1] for line in log.splitlines() if line.startswith(f"{lib} epoch")]
        assert len(losses[lib]) == 3, log
        outs[lib] = np.load(out)
    assert losses["kael"] == losses["torch"], losses
    assert sorted(outs["kael"].files) == sorted(outs["torch"].files)
    assert "module.0.weight" in outs["kael"].files
    for k in outs["torch"].files:
        np.testing.assert_allclose(outs["kael"][k], outs["torch"][k], rtol=1e-5, atol=1e-6, err_msg=k)
