"""One rank of test_distributed_errors (run by mpirun): python dist_worker_errors.py MODE.
Each mode prints what the test checks; see the test for what each must show."""

import datetime
import os
import signal
import sys
import time

import kael
import kael.distributed as dist


def main(mode):
    if mode == "before_init":
        for call in (lambda: dist.all_reduce(kael.ones(2)), lambda: dist.get_rank(), lambda: dist.barrier(),
                     lambda: dist.new_group([0])):
            try:
                call()
                raise AssertionError("no error before init_process_group")
            except RuntimeError as e:
                assert "init_process_group" in str(e), e
        print("before_init ok", flush=True)
        return
    timeout = datetime.timedelta(seconds=float(os.environ.get("DIST_TEST_TIMEOUT", "3")))
    dist.init_process_group("mpi", timeout=timeout)
    rank = dist.get_rank()
    if mode in ("mismatch_shape", "mismatch_dtype"):
        if mode == "mismatch_shape":
            t = kael.ones(4, 3) if rank == 0 else kael.ones(5)
        else:
            t = kael.ones(4) if rank == 0 else kael.ones(4, dtype=kael.float64)
        try:
            dist.all_reduce(t)
            raise AssertionError("mismatched all_reduce did not raise")
        except RuntimeError as e:
            print(f"rank {rank} caught: {e}", flush=True)
        # the group still works
        t = kael.ones(3)
        dist.all_reduce(t)
        assert t.tolist() == [float(dist.get_world_size())] * 3
        print(f"rank {rank} recovered", flush=True)
    elif mode == "mismatch_collective":
        try:
            if rank == 0:
                dist.all_reduce(kael.ones(3))
            else:
                dist.broadcast(kael.ones(3), src=0)
            raise AssertionError("different collectives did not raise")
        except RuntimeError as e:
            print(f"rank {rank} caught: {e}", flush=True)
    elif mode == "raise":
        dist.all_reduce(kael.ones(3))
        if rank == 1:
            raise ValueError("rank 1 fails on purpose")
        dist.all_reduce(kael.ones(3))  # waits for rank 1, which is gone
        print(f"rank {rank} should not get here", flush=True)
    elif mode == "skip":
        if rank == 1:
            time.sleep(60)  # never joins: rank 0 must time out long before this ends
        else:
            t0 = time.monotonic()
            try:
                dist.all_reduce(kael.ones(3))
            except RuntimeError as e:
                print(f"rank {rank} timed out after {time.monotonic() - t0:.1f}s: {e}", flush=True)
                raise
    elif mode == "exit":
        dist.all_reduce(kael.ones(3))
        if rank == 1:
            sys.exit(3)  # no exception: the others wait until their timeout
        dist.all_reduce(kael.ones(3))
        print(f"rank {rank} should not get here", flush=True)
    elif mode == "kill":
        dist.all_reduce(kael.ones(3))
        if rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        dist.all_reduce(kael.ones(3))
        print(f"rank {rank} should not get here", flush=True)
    elif mode == "edges":
        base = kael.zeros(10)
        view = base[2:5]  # a contiguous view at an offset
        view.fill_(rank + 1.0)
        dist.all_reduce(view)
        assert base.tolist() == [0.0] * 2 + [3.0] * 3 + [0.0] * 5, base
        empty = kael.zeros(0)
        dist.all_reduce(empty)
        scalar = kael.tensor(float(rank + 1))
        dist.all_reduce(scalar)
        assert scalar.item() == 3.0
        for call, kind, text in [
                (lambda: dist.broadcast(kael.ones(2), src=5), ValueError, "src 5 is not a rank of the group"),
                (lambda: dist.broadcast(kael.ones(2), group_src=7), ValueError, "src 7 is not a rank of a group of 2"),
                (lambda: dist.all_reduce([1, 2]), TypeError, "must be a kael.Tensor, got list"),
                (lambda: dist.all_to_all_single(kael.zeros(4), kael.zeros(4), [1, 1], [3, 3]), ValueError,
                 "output_split_sizes sum to 2, the tensor's dim 0 is 4"),
                (lambda: dist.all_gather_into_tensor(kael.zeros(3), kael.zeros(2)), ValueError,
                 "output has 3 elements, expected world size 2 x input's 2"),
                (lambda: dist.all_reduce(kael.ones(2, dtype=kael.int32), op=dist.ReduceOp.AVG), ValueError,
                 "AVG needs a floating dtype, got int32"),
                (lambda: dist.send(kael.ones(2), dst=9), ValueError, "dst 9 is not a rank of the group")]:
            try:
                call()
                raise AssertionError(f"no {kind.__name__} for {text}")
            except kind as e:
                assert text in str(e), e
        dist.barrier()  # the group still works
        print(f"rank {rank} edges ok", flush=True)
    elif mode == "check_off":
        assert dist._C._dist_group_info(dist._world._handle)[3] is False
        t = kael.ones(3)
        dist.all_reduce(t)
        assert t.tolist() == [float(dist.get_world_size())] * 3
        print(f"rank {rank} check_off ok", flush=True)
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv[1])
