"""One rank of test_distributed_ddp (run by mpirun): python dist_worker_ddp.py MODE.

Every rank also trains the single-process reference (the same initial parameters, the whole
batch) and compares; prints "rank R: MODE ok" at the end."""

import sys

import numpy as np

import kael
import kael.distributed as dist
import kael.nn as nn
import kael.nn.functional as F
from kael.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self, unused=False, branch=False):
        super().__init__()
        self.fc1 = nn.Linear(8, 32)
        self.fc2 = nn.Linear(32, 16)
        self.fc3 = nn.Linear(16, 4)
        self.register_buffer("steps", kael.zeros(1))
        if unused:
            self.unused = nn.Linear(4, 4)
        if branch:
            self.branch = nn.Linear(16, 4)
        self.use_branch = False

    def forward(self, x):
        h = kael.tanh(self.fc2(kael.tanh(self.fc1(x))))
        out = self.fc3(h)
        if self.use_branch:
            out = out + self.branch(h)
        return out


def batch(step, n):
    rng = np.random.default_rng(100 + step)
    x = rng.standard_normal((n, 8)).astype(np.float32)
    y = rng.standard_normal((n, 4)).astype(np.float32)
    return kael.from_numpy(x), kael.from_numpy(y)


def params_close(a, b, what, rtol=1e-6):
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        pa, qa = p.detach().numpy(), q.detach().numpy()
        if not np.allclose(pa, qa, rtol=rtol, atol=rtol * np.abs(qa).max()):
            raise AssertionError(f"rank {dist.get_rank()}: {what}: {name} differs by "
                                 f"{np.abs(pa - qa).max()} (max |ref| {np.abs(qa).max()})")


def grads_close(ddp_model, ref, what, rtol=1e-6):
    for (name, p), q in zip(ddp_model.named_parameters(), ref.parameters()):
        if (p.grad is None) != (q.grad is None):
            raise AssertionError(f"rank {dist.get_rank()}: {what}: {name}.grad is {p.grad} vs reference {q.grad}")
        if p.grad is not None:
            g, h = p.grad.numpy(), q.grad.numpy()
            if not np.allclose(g, h, rtol=rtol, atol=rtol * max(np.abs(h).max(), 1e-30)):
                raise AssertionError(f"rank {dist.get_rank()}: {what}: {name}.grad differs by {np.abs(g - h).max()}")


def train(mode):
    rank, world = dist.get_rank(), dist.get_world_size()
    kael.manual_seed(1234 + rank)  # every rank starts different: DDP must broadcast rank 0's
    local = Net()
    kael.manual_seed(1234)
    ref = Net()
    cap = 0.001 if mode == "small_buckets" else None  # about 1 KB: one or two parameters a bucket
    model = DDP(local, bucket_cap_mb=cap)
    assert model.module is local
    assert all(k.startswith("module.") for k in model.state_dict()), list(model.state_dict())
    params_close(local, ref, "after construction")
    if mode == "small_buckets":
        assert len(model._buckets) >= 4, len(model._buckets)
        # the gradient of fc1's output comes before fc1's parameter gradients, after the others':
        # by then the buckets of fc3 and fc2 must be on their way, fc1's not
        seen = []
        local.fc1.register_forward_hook(
            lambda m, args, out: [out.register_hook(lambda g: seen.append(model._next_bucket)), None][1])
    opt = kael.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ref_opt = kael.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    n = 8 * world
    for step in range(6):
        x, y = batch(step, n)
        lo, hi = rank * n // world, (rank + 1) * n // world
        opt.zero_grad()
        local.steps.fill_(float(rank + step))  # DDP's forward broadcasts rank 0's buffers
        F.mse_loss(model(x[lo:hi]), y[lo:hi]).backward()
        assert local.steps.item() == float(step), (rank, local.steps)
        ref_opt.zero_grad()
        F.mse_loss(ref(x), y).backward()
        grads_close(model.module, ref, f"step {step} grads")
        opt.step()
        ref_opt.step()
        params_close(local, ref, f"step {step}")
    if mode == "small_buckets":
        assert seen and all(0 < s < len(model._buckets) for s in seen), (seen, len(model._buckets))


def no_sync():
    rank, world = dist.get_rank(), dist.get_world_size()
    kael.manual_seed(7)
    local, ref = Net(), Net()
    with kael.no_grad():
        for p, q in zip(local.parameters(), ref.parameters()):
            q.copy_(p)
    model = DDP(local, bucket_cap_mb=0.002)
    n = 4 * world
    micro = [batch(10 + j, n) for j in range(3)]
    model.zero_grad()
    with model.no_sync():
        for x, y in micro[:2]:
            lo, hi = rank * n // world, (rank + 1) * n // world
            F.mse_loss(model(x[lo:hi]), y[lo:hi]).backward()
    # inside no_sync the gradients are local: they differ between ranks
    g = kael.zeros(world)
    g[rank] = local.fc3.weight.grad.sum()
    dist.all_reduce(g)
    assert g[0].item() != g[1].item(), g
    x, y = micro[2]
    lo, hi = rank * n // world, (rank + 1) * n // world
    F.mse_loss(model(x[lo:hi]), y[lo:hi]).backward()
    ref.zero_grad()
    loss = sum(F.mse_loss(ref(x), y) for x, y in micro)
    loss.backward()
    grads_close(local, ref, "no_sync accumulation", rtol=1e-5)


def unused(find):
    rank = dist.get_rank()
    kael.manual_seed(3)
    local = Net(unused=True)
    model = DDP(local, find_unused_parameters=find)
    x, y = batch(0, 8)
    F.mse_loss(model(x), y).backward()
    if find:
        assert local.unused.weight.grad is None and local.unused.bias.grad is None
        F.mse_loss(model(x), y).backward()  # a second iteration works
        assert local.unused.weight.grad is None
        print(f"rank {rank}: find_unused ok", flush=True)
    else:
        try:
            model(x)
            raise AssertionError("the second forward did not raise")
        except RuntimeError as e:
            assert "Expected to have finished reduction in the prior iteration" in str(e), e
            assert "unused.weight" in str(e) and "unused.bias" in str(e), e
            print(f"rank {rank}: unused error: {str(e).splitlines()[-1]}", flush=True)


def locally_unused():
    """A branch only rank 0 uses: its gradient is rank 0's divided by the world size everywhere."""
    rank, world = dist.get_rank(), dist.get_world_size()
    kael.manual_seed(5)
    local, ref = Net(branch=True), Net(branch=True)
    with kael.no_grad():
        for p, q in zip(local.parameters(), ref.parameters()):
            q.copy_(p)
    model = DDP(local, find_unused_parameters=True)
    x, y = batch(rank, 8)
    local.use_branch = rank == 0
    F.mse_loss(model(x), y).backward()
    # the reference: the average over ranks of each rank's loss
    ref.zero_grad()
    total = None
    for r in range(world):
        ref.use_branch = r == 0
        xr, yr = batch(r, 8)
        lr = F.mse_loss(ref(xr), yr) / world
        total = lr if total is None else total + lr
    total.backward()
    grads_close(local, ref, "locally unused branch", rtol=1e-5)


def main(mode):
    dist.init_process_group("mpi")
    if mode in ("train", "small_buckets"):
        train(mode)
    elif mode == "no_sync":
        no_sync()
    elif mode in ("unused", "find_unused"):
        unused(mode == "find_unused")
    elif mode == "locally_unused":
        locally_unused()
    else:
        raise SystemExit(f"unknown mode {mode}")
    dist.barrier()
    print(f"rank {dist.get_rank()}: {mode} ok", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
