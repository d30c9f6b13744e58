"""A program for test_distributed_run: written as for torchrun (reads RANK/WORLD_SIZE)."""
import os
import sys
import time

import kael
import kael.distributed as dist

if __name__ == "__main__":
    dist.init_process_group(backend="gloo")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    assert rank == dist.get_rank() and world == dist.get_world_size(), (rank, world)
    assert os.environ["LOCAL_RANK"] == str(rank)
    t = kael.full((3,), float(rank))
    dist.all_reduce(t)
    print(f"rank {rank}/{world} args={sys.argv[1:]} sum={t.tolist()[0]} pid={os.getpid()}", flush=True)
    if sys.argv[1:2] == ["sleep"]:
        dist.barrier()
        print(f"rank {rank} ready", flush=True)
        time.sleep(120)
    dist.destroy_process_group()
