"""One rank of test_distributed_collectives (run by mpirun): every collective on every dtype,
checked against NumPy on data that every rank can regenerate for every other rank. Prints
"rank R: ok N checks" at the end; any mismatch raises (and the job aborts)."""

import sys
import threading
import time

import numpy as np

import kael
import kael.distributed as dist

DTYPES = {
    "bool": kael.bool, "uint8": kael.uint8, "int8": kael.int8, "int16": kael.int16, "int32": kael.int32,
    "int64": kael.int64, "float16": kael.float16, "bfloat16": kael.bfloat16, "float32": kael.float32,
    "float64": kael.float64,
}
FLOATING = {"float16", "bfloat16", "float32", "float64"}
checks = 0


def data(name, rank, case, shape=(3, 5), for_product=False):
    """Rank `rank`'s input for test `case`: small integers, exact in every dtype."""
    rng = np.random.default_rng(1000 * rank + case)
    if name == "bool":
        return rng.random(shape) < 0.5
    if for_product:
        return rng.choice([1, 2] if name == "uint8" else [-1, 1, 2], size=shape).astype(np.float64)
    lo = 0 if name == "uint8" else -4
    return rng.integers(lo, 5, size=shape).astype(np.float64)


def kt(name, a):
    if name == "bool":
        return kael.from_numpy(np.ascontiguousarray(a, dtype=np.bool_))
    if name == "bfloat16":
        return kael.from_numpy(a.astype(np.float32)).to(kael.bfloat16)
    return kael.from_numpy(a.astype(np.dtype(name)))


def kn(t):
    if t.dtype == kael.bool:
        return t.numpy().copy()
    return t.float().numpy().astype(np.float64) if t.dtype == kael.bfloat16 else t.numpy().astype(np.float64)


def check(what, got, want, tol=0.0):
    global checks
    checks += 1
    if got.shape != want.shape or not np.allclose(got, want, rtol=tol, atol=tol):
        raise AssertionError(f"rank {dist.get_rank()}: {what}: got\n{got}\nwant\n{want}")


def oracle(name, op, arrays):
    if name == "bool":
        red = {"SUM": np.logical_or.reduce, "MAX": np.logical_or.reduce, "PRODUCT": np.logical_and.reduce,
               "MIN": np.logical_and.reduce}[op]
        return red(np.stack(arrays))
    s = np.stack(arrays)
    return {"SUM": s.sum(0), "AVG": s.mean(0), "PRODUCT": s.prod(0), "MIN": s.min(0), "MAX": s.max(0)}[op]


def main():
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert dist.is_initialized() and world == int(sys.argv[1]), (world, sys.argv)
    case = 0
    for name, dtype in DTYPES.items():
        ops = ["SUM", "PRODUCT", "MIN", "MAX"] + (["AVG"] if name in FLOATING else [])
        for op in ops:
            case += 1
            arrays = [data(name, r, case, for_product=op == "PRODUCT") for r in range(world)]
            t = kt(name, arrays[rank])
            dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
            want = oracle(name, op, arrays)
            tol = 1e-2 if name in ("float16", "bfloat16") and op == "AVG" else 0.0
            check(f"all_reduce {name} {op}", kn(t), want, tol)
            # reduce into the last rank: the others keep their input
            t = kt(name, arrays[rank])
            dist.reduce(t, dst=world - 1, op=getattr(dist.ReduceOp, op))
            check(f"reduce {name} {op}", kn(t), want if rank == world - 1 else kn(kt(name, arrays[rank])), tol)
        if name not in FLOATING and name != "bool":
            try:
                dist.all_reduce(kt(name, arrays[rank]), op=dist.ReduceOp.AVG)
                raise AssertionError(f"all_reduce AVG on {name} did not raise")
            except ValueError as e:
                assert "AVG" in str(e) and name in str(e), e
        # broadcast from every rank
        for src in range(world):
            case += 1
            arrays = [data(name, r, case) for r in range(world)]
            t = kt(name, arrays[rank])
            dist.broadcast(t, src=src)
            check(f"broadcast {name} src={src}", kn(t), kn(kt(name, arrays[src])))
        # all_gather, all_gather_into_tensor
        case += 1
        arrays = [data(name, r, case) for r in range(world)]
        mine = kt(name, arrays[rank])
        outs = [kael.zeros(3, 5, dtype=dtype) for _ in range(world)]
        dist.all_gather(outs, mine)
        for r in range(world):
            check(f"all_gather {name} [{r}]", kn(outs[r]), kn(kt(name, arrays[r])))
        flat = kael.zeros(world * 3, 5, dtype=dtype)
        dist.all_gather_into_tensor(flat, mine)
        check(f"all_gather_into_tensor {name}", kn(flat), np.concatenate([kn(kt(name, a)) for a in arrays]))
        # reduce_scatter_tensor
        for op in ["SUM", "MAX"]:
            case += 1
            arrays = [data(name, r, case, shape=(world * 2, 3)) for r in range(world)]
            out = kael.zeros(2, 3, dtype=dtype)
            dist.reduce_scatter_tensor(out, kt(name, arrays[rank]), op=getattr(dist.ReduceOp, op))
            want = oracle(name, op, arrays)[rank * 2:(rank + 1) * 2]
            check(f"reduce_scatter_tensor {name} {op}", kn(out), want)
        # gather to rank 0, scatter from the last rank
        case += 1
        arrays = [data(name, r, case) for r in range(world)]
        glist = [kael.zeros(3, 5, dtype=dtype) for _ in range(world)] if rank == 0 else None
        dist.gather(kt(name, arrays[rank]), glist, dst=0)
        if rank == 0:
            for r in range(world):
                check(f"gather {name} [{r}]", kn(glist[r]), kn(kt(name, arrays[r])))
        src = world - 1
        pieces = [data(name, src, case + 100 + i) for i in range(world)]
        out = kael.zeros(3, 5, dtype=dtype)
        dist.scatter(out, [kt(name, p) for p in pieces] if rank == src else None, src=src)
        check(f"scatter {name}", kn(out), kn(kt(name, pieces[rank])))
        # all_to_all_single, equal and uneven splits
        case += 1
        arrays = [data(name, r, case, shape=(world * 2, 3)) for r in range(world)]
        out = kael.zeros(world * 2, 3, dtype=dtype)
        dist.all_to_all_single(out, kt(name, arrays[rank]))
        want = np.concatenate([kn(kt(name, arrays[r]))[rank * 2:(rank + 1) * 2] for r in range(world)])
        check(f"all_to_all_single {name}", kn(out), want)
        # rank r sends (j + r) % 3 + 1 rows to rank j
        splits = [[(j + r) % 3 + 1 for j in range(world)] for r in range(world)]
        arrays = [data(name, r, case + 50, shape=(sum(splits[r]), 2)) for r in range(world)]
        out_splits = [splits[r][rank] for r in range(world)]
        out = kael.zeros(sum(out_splits), 2, dtype=dtype)
        dist.all_to_all_single(out, kt(name, arrays[rank]), out_splits, splits[rank])
        parts = []
        for r in range(world):
            start = sum(splits[r][:rank])
            parts.append(kn(kt(name, arrays[r]))[start:start + splits[r][rank]])
        check(f"all_to_all_single uneven {name}", kn(out), np.concatenate(parts))
        # send/recv around the ring, and isend/irecv both ways at once
        case += 1
        arrays = [data(name, r, case) for r in range(world)]
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        got = kael.zeros(3, 5, dtype=dtype)
        if rank % 2 == 0:
            dist.send(kt(name, arrays[rank]), dst=nxt)
            sender = dist.recv(got, src=prv)
        else:
            sender = dist.recv(got, src=None)
            dist.send(kt(name, arrays[rank]), dst=nxt)
        assert sender == prv, (sender, prv)
        check(f"send/recv {name}", kn(got), kn(kt(name, arrays[prv])))
        got = kael.zeros(3, 5, dtype=dtype)
        reqs = [dist.isend(kt(name, arrays[rank]), dst=nxt), dist.irecv(got, src=prv)]
        for r in reqs:
            r.wait()
        check(f"isend/irecv {name}", kn(got), kn(kt(name, arrays[prv])))
    # async works complete in issue order, and their results are right
    ts = [kael.full((1000,), float(rank + i)) for i in range(20)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for i in reversed(range(20)):
        works[i].wait()
        assert all(w.is_completed() for w in works[:i + 1]), f"work {i} done before an earlier one"
        check(f"async all_reduce {i}", kn(ts[i]), np.full(1000, sum(r + i for r in range(world)), dtype=np.float64))
    # the list forms: reduce_scatter and all_to_all, tensors of different shapes
    ins = [kael.full((2, 3), float(rank * 10 + r)) for r in range(world)]
    out = kael.zeros(2, 3)
    dist.reduce_scatter(out, ins)
    check("reduce_scatter list", kn(out), np.full((2, 3), float(sum(q * 10 + rank for q in range(world)))))
    ins = [kael.full((r + 1,), float(rank * 100 + r)) for r in range(world)]
    outs = [kael.zeros(rank + 1) for _ in range(world)]
    dist.all_to_all(outs, ins)
    for q in range(world):
        check(f"all_to_all list [{q}]", kn(outs[q]), np.full(rank + 1, float(q * 100 + rank)))
    w = dist.irecv(kael.zeros(1), src=None) if rank == 0 else None
    if rank == world - 1:
        dist.send(kael.ones(1), dst=0, tag=0)
    if rank == 0:
        assert w.result() == world - 1, w.result()
    dist.barrier()
    # the GIL is released while a collective waits: a Python thread runs meanwhile
    count, stop = [0], [False]

    def spin():
        while not stop[0]:
            count[0] += 1

    th = threading.Thread(target=spin)
    th.start()
    time.sleep(0.05)
    if rank != 0:
        time.sleep(0.5)  # rank 0 waits about 0.5 s in the barrier
    before = count[0]
    dist.barrier()
    during = count[0] - before
    stop[0] = True
    th.join()
    if rank == 0:
        assert during > 1000, f"a Python thread made {during} steps while rank 0 waited 0.5 s: the GIL was held"
    # objects
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank, "s": "x" * rank})
    assert objs == [{"rank": r, "s": "x" * r} for r in range(world)], objs
    lst = [1, "two", 3.0] if rank == 0 else [None, None, None]
    dist.broadcast_object_list(lst, src=0)
    assert lst == [1, "two", 3.0], lst
    gl = [None] * world if rank == 1 else None
    dist.gather_object(("g", rank), gl, dst=1)
    if rank == 1:
        assert gl == [("g", r) for r in range(world)], gl
    out = [None]
    dist.scatter_object_list(out, [{"to": r} for r in range(world)] if rank == 0 else None, src=0)
    assert out[0] == {"to": rank}, out
    # a sub-group of the even ranks; broadcast's src is a global rank
    evens = dist.new_group([r for r in range(world) if r % 2 == 0])
    t = kael.full((4,), float(rank))
    dist.all_reduce(t, group=evens)
    if rank % 2 == 0:
        check("new_group all_reduce", kn(t), np.full(4, sum(r for r in range(world) if r % 2 == 0), dtype=np.float64))
        assert dist.get_world_size(evens) == (world + 1) // 2
        t = kael.full((2,), float(rank))
        dist.broadcast(t, src=2 if world > 2 else 0, group=evens)
        check("new_group broadcast", kn(t), np.full(2, 2.0 if world > 2 else 0.0))
    else:
        check("new_group non-member untouched", kn(t), np.full(4, float(rank)))
        assert dist.get_rank(evens) == -1
    # non-contiguous -> ValueError, before anything is sent
    try:
        dist.all_reduce(kael.ones(4, 3).t())
        raise AssertionError("a non-contiguous tensor did not raise")
    except ValueError as e:
        assert "contiguous" in str(e), e
    dist.destroy_process_group()
    assert not dist.is_initialized()
    print(f"rank {rank}: ok {checks} checks", flush=True)


if __name__ == "__main__":
    main()
