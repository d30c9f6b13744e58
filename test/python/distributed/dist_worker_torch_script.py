"""A torch DDP training script in which the library is a name: `python dist_worker_torch_script.py
torch OUT` runs it on torch (gloo), `... kael OUT` on kael (MPI), the same lines. Rank 0 writes the
trained state_dict to OUT (.npz); test_distributed_torch_script compares the two."""
import importlib
import os
import sys

import numpy as np

LIB = sys.argv[1]
torch = importlib.import_module(LIB)
dist = importlib.import_module(LIB + ".distributed")
nn = importlib.import_module(LIB + ".nn")
F = importlib.import_module(LIB + ".nn.functional")
DDP = importlib.import_module(LIB + ".nn.parallel").DistributedDataParallel
data = importlib.import_module(LIB + ".utils.data")
DistributedSampler = importlib.import_module(LIB + ".utils.data.distributed").DistributedSampler


def main(out):
    if LIB == "torch":  # torchrun's variables, from Open MPI's (kael.distributed sets them itself)
        os.environ.setdefault("RANK", os.environ["OMPI_COMM_WORLD_RANK"])
        os.environ.setdefault("WORLD_SIZE", os.environ["OMPI_COMM_WORLD_SIZE"])
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert int(os.environ["RANK"]) == rank and int(os.environ["WORLD_SIZE"]) == world
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    rng = np.random.default_rng(100 + rank)  # every rank starts different: DDP broadcasts rank 0's
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((rng.standard_normal(tuple(p.shape)) * 0.3).astype(np.float32)))
    ddp = DDP(model)
    x_all = torch.from_numpy(np.random.default_rng(1).standard_normal((64, 6)).astype(np.float32))
    y_all = torch.from_numpy(np.random.default_rng(2).integers(0, 3, 64))
    dataset = data.TensorDataset(x_all, y_all)
    sampler = DistributedSampler(dataset, shuffle=False)
    loader = data.DataLoader(dataset, batch_size=8, sampler=sampler)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        total = torch.zeros(1)
        for x, y in loader:
            opt.zero_grad()
            loss = F.cross_entropy(ddp(x), y)
            loss.backward()
            opt.step()
            total += loss.detach()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        if rank == 0:
            print(f"{LIB} epoch {epoch} loss {total.item() / (world * len(loader)):.6f}", flush=True)
    if rank == 0:
        np.savez(out, **{k: v.detach().numpy() for k, v in ddp.state_dict().items()})
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[2])
