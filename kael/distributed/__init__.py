"""kael.distributed: torch.distributed's API on MPI (docs/distributed.md).

A program runs one process per rank, started by ``mpirun -np N python train.py`` or
``python -m kael.distributed.run --nproc N train.py``. Each process group has one communication
thread that runs its collectives in issue order (libs/distributed, Note [The communication
thread]); a call returns a :class:`Work` with ``async_op=True`` and otherwise waits for it with
the GIL released. Tensors are contiguous CPU tensors of any dtype; collectives write in place.
"""

from __future__ import annotations

import atexit
import datetime
import enum
import os
import pickle
import sys
import warnings

import kael
from kael import _C

__all__ = [
    "Backend", "GroupMember", "ProcessGroup", "ReduceOp", "Work", "all_gather", "all_gather_into_tensor",
    "all_gather_object", "all_reduce", "all_to_all", "all_to_all_single", "barrier", "broadcast",
    "broadcast_object_list", "destroy_process_group", "gather", "gather_object", "get_backend", "get_rank",
    "get_world_size", "init_process_group", "irecv", "is_available", "is_initialized", "is_mpi_available",
    "isend", "new_group", "recv", "reduce", "reduce_scatter", "reduce_scatter_tensor", "scatter",
    "scatter_object_list", "send",
]

#: The default timeout of init_process_group: a collective some rank never joins fails after it.
default_pg_timeout = datetime.timedelta(minutes=5)


def _set_torchrun_env():
    """RANK, LOCAL_RANK, WORLD_SIZE and LOCAL_WORLD_SIZE (torchrun's variables, which programs
    read) from Open MPI's, when mpirun started this process and they are not set."""
    for ours, ompi in (("RANK", "OMPI_COMM_WORLD_RANK"), ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"),
                       ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"), ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE")):
        if ompi in os.environ and ours not in os.environ:
            os.environ[ours] = os.environ[ompi]


_set_torchrun_env()


def is_available() -> bool:
    """Whether kael was built with MPI (CMake found it); False means init_process_group raises."""
    return bool(_C._dist_is_available())


def is_mpi_available() -> bool:
    return is_available()


class ReduceOp(enum.IntEnum):
    """The reductions of all_reduce, reduce and reduce_scatter (AVG: floating dtypes only)."""
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4


class Backend(str):
    """Backend names: kael has one, MPI; "gloo" (torch's CPU backend) is accepted as its alias."""
    MPI = "mpi"
    GLOO = "gloo"

    def __new__(cls, name: str):
        return str.__new__(cls, name.lower())


class ProcessGroup:
    """A group of ranks with its own MPI communicator and communication thread."""

    def __init__(self, handle, ranks):
        self._handle = handle
        self._ranks = list(ranks)  # global rank of each group rank
        self._rank, self._size, _, _ = _C._dist_group_info(handle)

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size

    def name(self) -> str:
        return "mpi"

    def __repr__(self):
        return f"ProcessGroup(mpi, rank={self._rank}, size={self._size}, ranks={self._ranks})"


class GroupMember:
    WORLD = None  # the default group, as torch's GroupMember.WORLD (None means it everywhere)
    NON_GROUP_MEMBER = object()


class Work:
    """The handle of an issued collective: wait() blocks until it completed (raising its error),
    is_completed() asks without blocking. Works of one group complete in issue order."""

    def __init__(self, handle, then=None, keep=()):
        self._handle = handle
        self._then = then
        self._keep = keep
        self._result = None
        self._done = False

    def wait(self, timeout=None) -> bool:
        if not self._done:
            source = _C._dist_wait(self._handle)
            self._done = True
            if self._then is not None:
                self._result = self._then(source)
            self._keep = ()
        return True

    def is_completed(self) -> bool:
        return self._done or bool(_C._dist_is_completed(self._handle))

    def is_success(self) -> bool:
        return self.is_completed()

    def result(self):
        self.wait()
        return self._result


class _Done(Work):
    """A work that completed already (a rank outside the group, an empty list)."""

    def __init__(self):
        super().__init__(None)
        self._done = True


# ---------------------------------------------------------------- the default group
_world: ProcessGroup | None = None
_groups: list[ProcessGroup] = []
_excepthook_installed = False


def _not_initialized(fn):
    return RuntimeError(
        f"{fn}: Default process group has not been initialized, please make sure to call init_process_group.")


def is_initialized() -> bool:
    return _world is not None


def _timeout_ms(fn, timeout):
    if timeout is None:
        timeout = default_pg_timeout
    if isinstance(timeout, (int, float)):
        timeout = datetime.timedelta(seconds=timeout)
    if not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"{fn}: timeout must be a datetime.timedelta, got {type(timeout).__name__}")
    ms = int(timeout.total_seconds() * 1000)
    if ms <= 0:
        raise ValueError(f"{fn}: timeout must be positive, got {timeout}")
    return ms


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None, check=None):
    """Initializes MPI and the default process group (every rank calls it).

    backend: "mpi" (or None; "gloo", torch's CPU backend, means MPI too). The ranks and world size
    are MPI's (mpirun's); world_size and rank, when given, must agree with them. timeout: a
    collective that does not complete within it raises RuntimeError on the ranks waiting for it
    (default 5 minutes). check: the shape/dtype agreement check before each collective (default
    on; KAEL_DISTRIBUTED_CHECK=0 turns it off).
    """
    global _world
    if not is_available():
        raise RuntimeError("init_process_group: kael was built without MPI (install libopenmpi-dev and rebuild); "
                           "kael.distributed.is_available() is False")
    if _world is not None:
        raise ValueError("init_process_group: trying to initialize the default process group twice!")
    if backend is not None and str(backend).lower() not in ("mpi", "gloo"):
        raise ValueError(f"init_process_group: backend {backend!r} is not supported: kael.distributed runs on MPI "
                         "(backend='mpi')")
    ms = _timeout_ms("init_process_group", timeout)
    if check is None:
        check = os.environ.get("KAEL_DISTRIBUTED_CHECK", "1") != "0"
    handle = _C._dist_init(ms, bool(check))
    rank_, size_, _, _ = _C._dist_group_info(handle)
    if world_size not in (-1, None) and int(world_size) != size_:
        _C._dist_shutdown(handle)
        raise ValueError(f"init_process_group: world_size={world_size} but MPI started {size_} processes")
    if rank not in (-1, None) and int(rank) != rank_:
        _C._dist_shutdown(handle)
        raise ValueError(f"init_process_group: rank={rank} but MPI gave this process rank {rank_}")
    _world = ProcessGroup(handle, range(size_))
    _groups.append(_world)
    _install_exit_handling()


def _install_exit_handling():
    global _excepthook_installed
    if _excepthook_installed:
        return
    _excepthook_installed = True
    previous = sys.excepthook

    def excepthook(kind, value, tb):
        # An exception that ends one rank would leave the others waiting in their next collective:
        # print it, then end the whole job (MPI_Abort), as mpi4py's `-m mpi4py` does.
        previous(kind, value, tb)
        if _C._dist_world() is not None and _C._dist_world()[1] > 1:
            sys.stdout.flush()
            sys.stderr.flush()
            print(f"kael.distributed: rank {_C._dist_world()[0]} raised {kind.__name__}; aborting the job",
                  file=sys.stderr, flush=True)
            _C._dist_abort(1)

    sys.excepthook = excepthook
    atexit.register(_at_exit)


def _at_exit():
    broken = [g for g in _groups if _C._dist_broken(g._handle)]
    if broken:
        # Note [Timeouts]: a broken group's thread may be blocked in MPI for good; MPI_Finalize would hang.
        print(f"kael.distributed: exiting after a communication error ({_C._dist_broken(broken[0]._handle)}); "
              "aborting the job", file=sys.stderr, flush=True)
        _C._dist_abort(1)
    destroy_process_group()
    _C._dist_finalize()


def destroy_process_group(group=None):
    """Shuts the group down (its queued work completes first); None: every group, after which
    init_process_group may be called again."""
    global _world
    if group is None or group is _world:
        for g in reversed(_groups):
            _C._dist_shutdown(g._handle)
        _groups.clear()
        _world = None
    elif isinstance(group, ProcessGroup):
        _C._dist_shutdown(group._handle)
        if group in _groups:
            _groups.remove(group)


def _group(fn, group):
    """The ProcessGroup of `group` (None: the default), or None when this rank is not in it."""
    if _world is None:
        raise _not_initialized(fn)
    if group is None:
        return _world
    if group is GroupMember.NON_GROUP_MEMBER:
        return None
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"{fn}: group must be a ProcessGroup, got {type(group).__name__}")
    return group


def _group_rank(fn, pg, global_rank, what):
    try:
        return pg._ranks.index(int(global_rank))
    except ValueError:
        raise ValueError(f"{fn}: {what} {global_rank} is not a rank of the group (its ranks: {pg._ranks})") from None


def get_rank(group=None) -> int:
    """This process's rank in the group (-1 when it is not in it)."""
    pg = _group("get_rank", group)
    return -1 if pg is None else pg.rank()


def get_world_size(group=None) -> int:
    pg = _group("get_world_size", group)
    return -1 if pg is None else pg.size()


def get_backend(group=None) -> str:
    _group("get_backend", group)
    return Backend.MPI


def get_global_rank(group, group_rank: int) -> int:
    pg = _group("get_global_rank", group)
    return pg._ranks[group_rank]


def get_process_group_ranks(group) -> list:
    pg = _group("get_process_group_ranks", group)
    return list(pg._ranks)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False):
    """The group of `ranks` (global ranks; None: all). Every rank of the default group calls it,
    as in torch; a rank outside it gets GroupMember.NON_GROUP_MEMBER."""
    if _world is None:
        raise _not_initialized("new_group")
    ranks = sorted(range(_world.size()) if ranks is None else (int(r) for r in ranks))
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"new_group: ranks {ranks} repeat a rank")
    for r in ranks:
        if not 0 <= r < _world.size():
            raise ValueError(f"new_group: rank {r} is not in the world of {_world.size()} ranks")
    handle = _C._dist_new_group(_world._handle, ranks)
    if handle is None:
        return GroupMember.NON_GROUP_MEMBER
    pg = ProcessGroup(handle, ranks)
    _groups.append(pg)
    return pg


# ---------------------------------------------------------------- collectives
def _check_tensor(fn, t, name="tensor"):
    if not isinstance(t, kael.Tensor):
        raise TypeError(f"{fn}: {name} must be a kael.Tensor, got {type(t).__name__}")
    if not t.is_contiguous():
        raise ValueError(f"{fn}: Tensors must be contiguous ({name} of shape {list(t.shape)} is not)")


def _finish(work, async_op):
    if async_op:
        return work
    work.wait()
    return None


def _op(fn, op):
    try:
        return int(ReduceOp(op))
    except ValueError:
        raise ValueError(f"{fn}: unknown reduce op {op!r}") from None


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces the tensor over the group, in place on every rank."""
    pg = _group("all_reduce", group)
    if pg is None:
        return _Done() if async_op else None
    _check_tensor("all_reduce", tensor)
    return _finish(Work(_C._dist_all_reduce(pg._handle, tensor, _op("all_reduce", op)), keep=(tensor,)), async_op)


def broadcast(tensor, src=0, group=None, async_op=False, group_src=None):
    """Copies src's tensor (a global rank) into the tensor of every rank."""
    pg = _group("broadcast", group)
    if pg is None:
        return _Done() if async_op else None
    _check_tensor("broadcast", tensor)
    root = group_src if group_src is not None else _group_rank("broadcast", pg, src, "src")
    return _finish(Work(_C._dist_broadcast(pg._handle, tensor, root), keep=(tensor,)), async_op)


def reduce(tensor, dst=0, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Reduces the tensor over the group into dst's tensor (the others' are left as they were)."""
    pg = _group("reduce", group)
    if pg is None:
        return _Done() if async_op else None
    _check_tensor("reduce", tensor)
    root = group_dst if group_dst is not None else _group_rank("reduce", pg, dst, "dst")
    return _finish(Work(_C._dist_reduce(pg._handle, tensor, root, _op("reduce", op)), keep=(tensor,)), async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Every rank's input, concatenated in rank order into output (world_size times its size)."""
    pg = _group("all_gather_into_tensor", group)
    if pg is None:
        return _Done() if async_op else None
    _check_tensor("all_gather_into_tensor", output_tensor, "output_tensor")
    _check_tensor("all_gather_into_tensor", input_tensor, "input_tensor")
    w = _C._dist_all_gather(pg._handle, output_tensor, input_tensor)
    return _finish(Work(w, keep=(output_tensor, input_tensor)), async_op)


def _flat_like(tensors, n_each, dtype):
    return kael.empty(len(tensors) * n_each, dtype=dtype)


def _check_like(fn, name, tensors, like, what):
    """ValueError unless every tensor of the list has like's dtype and element count."""
    for i, t in enumerate(tensors):
        if not isinstance(t, kael.Tensor) or t.numel() != like.numel() or t.dtype != like.dtype:
            raise ValueError(f"{fn}: {name}[{i}] must be a {like.dtype} tensor of {like.numel()} elements like the "
                             f"{what}, got {getattr(t, 'dtype', type(t).__name__)} {list(getattr(t, 'shape', []))}")


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """tensor_list[i] = rank i's tensor."""
    pg = _group("all_gather", group)
    if pg is None:
        return _Done() if async_op else None
    _check_tensor("all_gather", tensor)
    if len(tensor_list) != pg.size():
        raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors, the group has {pg.size()} ranks")
    _check_like("all_gather", "tensor_list", tensor_list, tensor, "input")
    n = tensor.numel()
    flat = _flat_like(tensor_list, n, tensor.dtype)
    w = _C._dist_all_gather(pg._handle, flat, tensor)

    def then(_):
        for i, t in enumerate(tensor_list):
            t.copy_(flat[i * n:(i + 1) * n].view(t.shape))
    return _finish(Work(w, then, keep=(flat, tensor)), async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces input (world_size times output's size) over the group; rank i gets block i."""
    pg = _group("reduce_scatter_tensor", group)
    if pg is None:
        return _Done() if async_op else None
    _check_tensor("reduce_scatter_tensor", output, "output")
    _check_tensor("reduce_scatter_tensor", input, "input")
    w = _C._dist_reduce_scatter(pg._handle, output, input, _op("reduce_scatter_tensor", op))
    return _finish(Work(w, keep=(output, input)), async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces input_list[i] over the group into rank i's output."""
    pg = _group("reduce_scatter", group)
    if pg is None:
        return _Done() if async_op else None
    _check_tensor("reduce_scatter", output, "output")
    if len(input_list) != pg.size():
        raise ValueError(f"reduce_scatter: input_list has {len(input_list)} tensors, the group has {pg.size()} ranks")
    _check_like("reduce_scatter", "input_list", input_list, output, "output")
    flat = kael.cat([t.reshape(-1) for t in input_list])
    w = _C._dist_reduce_scatter(pg._handle, output, flat, _op("reduce_scatter", op))
    return _finish(Work(w, keep=(output, flat)), async_op)


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False, group_dst=None):
    """gather_list[i] on dst = rank i's tensor; gather_list only on dst."""
    pg = _group("gather", group)
    if pg is None:
        return _Done() if async_op else None
    _check_tensor("gather", tensor)
    root = group_dst if group_dst is not None else _group_rank("gather", pg, dst, "dst")
    n = tensor.numel()
    flat = None
    if pg.rank() == root:
        if gather_list is None or len(gather_list) != pg.size():
            raise ValueError(f"gather: the destination rank needs a gather_list of {pg.size()} tensors, got "
                             f"{None if gather_list is None else len(gather_list)}")
        _check_like("gather", "gather_list", gather_list, tensor, "input")
        flat = _flat_like(gather_list, n, tensor.dtype)
    elif gather_list:
        raise ValueError("gather: gather_list must be given on the destination rank only")
    w = _C._dist_gather(pg._handle, flat, tensor, root)

    def then(_):
        if flat is not None:
            for i, t in enumerate(gather_list):
                t.copy_(flat[i * n:(i + 1) * n].view(t.shape))
    return _finish(Work(w, then, keep=(flat, tensor)), async_op)


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False, group_src=None):
    """Rank i's tensor = scatter_list[i] of src; scatter_list only on src."""
    pg = _group("scatter", group)
    if pg is None:
        return _Done() if async_op else None
    _check_tensor("scatter", tensor)
    root = group_src if group_src is not None else _group_rank("scatter", pg, src, "src")
    flat = None
    if pg.rank() == root:
        if scatter_list is None or len(scatter_list) != pg.size():
            raise ValueError(f"scatter: the source rank needs a scatter_list of {pg.size()} tensors, got "
                             f"{None if scatter_list is None else len(scatter_list)}")
        _check_like("scatter", "scatter_list", scatter_list, tensor, "output")
        flat = kael.cat([t.reshape(-1) for t in scatter_list])
    elif scatter_list:
        raise ValueError("scatter: scatter_list must be given on the source rank only")
    w = _C._dist_scatter(pg._handle, tensor, flat, root)
    return _finish(Work(w, keep=(flat, tensor)), async_op)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op=False):
    """Splits input along dim 0 (equally, or by input_split_sizes), sends piece i to rank i, and
    concatenates what each rank sent here into output (pieces of output_split_sizes)."""
    pg = _group("all_to_all_single", group)
    if pg is None:
        return _Done() if async_op else None
    _check_tensor("all_to_all_single", output, "output")
    _check_tensor("all_to_all_single", input, "input")
    w = _C._dist_all_to_all(pg._handle, output, input,
                            None if output_split_sizes is None else list(output_split_sizes),
                            None if input_split_sizes is None else list(input_split_sizes))
    return _finish(Work(w, keep=(output, input)), async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """output_tensor_list[i] on rank j = input_tensor_list[j] of rank i."""
    pg = _group("all_to_all", group)
    if pg is None:
        return _Done() if async_op else None
    if len(output_tensor_list) != pg.size() or len(input_tensor_list) != pg.size():
        raise ValueError(f"all_to_all: both lists need {pg.size()} tensors, got {len(output_tensor_list)} and "
                         f"{len(input_tensor_list)}")
    flat_in = kael.cat([t.reshape(-1) for t in input_tensor_list])
    out_sizes = [t.numel() for t in output_tensor_list]
    flat_out = kael.empty(sum(out_sizes), dtype=flat_in.dtype)
    w = _C._dist_all_to_all(pg._handle, flat_out, flat_in, out_sizes, [t.numel() for t in input_tensor_list])

    def then(_):
        off = 0
        for t, n in zip(output_tensor_list, out_sizes):
            t.copy_(flat_out[off:off + n].view(t.shape))
            off += n
    return _finish(Work(w, then, keep=(flat_in, flat_out)), async_op)


def barrier(group=None, async_op=False, device_ids=None):
    """Returns when every rank of the group called it."""
    pg = _group("barrier", group)
    if pg is None:
        return _Done() if async_op else None
    return _finish(Work(_C._dist_barrier(pg._handle)), async_op)


# ---------------------------------------------------------------- point to point
def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Sends the tensor to dst (a global rank); the Work completes when it is sent."""
    pg = _group("isend", group)
    if pg is None:
        return _Done()
    _check_tensor("isend", tensor)
    peer = group_dst if group_dst is not None else _group_rank("isend", pg, dst, "dst")
    return Work(_C._dist_send(pg._handle, tensor, peer, int(tag)), keep=(tensor,))


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receives into the tensor from src (None: any rank); the Work's result() is the sender."""
    pg = _group("irecv", group)
    if pg is None:
        return _Done()
    _check_tensor("irecv", tensor)
    if group_src is not None:
        peer = group_src
    else:
        peer = -1 if src is None else _group_rank("irecv", pg, src, "src")
    return Work(_C._dist_recv(pg._handle, tensor, peer, int(tag)), lambda s: pg._ranks[s] if s >= 0 else -1,
                keep=(tensor,))


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    isend(tensor, dst, group, tag, group_dst).wait()


def recv(tensor, src=None, group=None, tag=0, group_src=None) -> int:
    """Receives into the tensor; returns the sender's rank (-1 when this rank is not in the group)."""
    w = irecv(tensor, src, group, tag, group_src)
    w.wait()
    return -1 if isinstance(w, _Done) else w._result


# ---------------------------------------------------------------- Python objects (pickle)
def _to_tensor(obj):
    data = pickle.dumps(obj)
    return kael.frombuffer(bytearray(data), dtype=kael.uint8) if data else kael.empty(0, dtype=kael.uint8)


def _from_tensor(t, n):
    return pickle.loads(t[:n].numpy().tobytes())


def _padded(t, n):
    out = kael.zeros(n, dtype=kael.uint8)
    if t.numel():
        out[:t.numel()].copy_(t)
    return out


def all_gather_object(object_list, obj, group=None):
    """object_list[i] = rank i's obj (pickled)."""
    pg = _group("all_gather_object", group)
    if pg is None:
        return
    if len(object_list) != pg.size():
        raise ValueError(f"all_gather_object: object_list has {len(object_list)} entries, the group has "
                         f"{pg.size()} ranks")
    t = _to_tensor(obj)
    sizes = kael.zeros(pg.size(), dtype=kael.int64)
    all_gather_into_tensor(sizes, kael.tensor([t.numel()], dtype=kael.int64), group=group)
    sizes = sizes.tolist()
    m = max(sizes)
    out = kael.empty(m * pg.size(), dtype=kael.uint8)
    all_gather_into_tensor(out, _padded(t, m), group=group)
    for i, n in enumerate(sizes):
        object_list[i] = _from_tensor(out[i * m:(i + 1) * m], n)


def gather_object(obj, object_gather_list=None, dst=0, group=None):
    """object_gather_list[i] on dst = rank i's obj."""
    pg = _group("gather_object", group)
    if pg is None:
        return
    root = _group_rank("gather_object", pg, dst, "dst")
    if pg.rank() == root and (object_gather_list is None or len(object_gather_list) != pg.size()):
        raise ValueError(f"gather_object: the destination rank needs an object_gather_list of {pg.size()} entries")
    t = _to_tensor(obj)
    sizes = kael.zeros(pg.size(), dtype=kael.int64)
    all_gather_into_tensor(sizes, kael.tensor([t.numel()], dtype=kael.int64), group=group)
    sizes = sizes.tolist()
    m = max(sizes)
    out = kael.empty(m * pg.size(), dtype=kael.uint8) if pg.rank() == root else None
    w = _C._dist_gather(pg._handle, out, _padded(t, m), root)
    Work(w).wait()
    if pg.rank() == root:
        for i, n in enumerate(sizes):
            object_gather_list[i] = _from_tensor(out[i * m:(i + 1) * m], n)


def broadcast_object_list(object_list, src=0, group=None, device=None):
    """object_list on every rank = src's object_list (same length everywhere)."""
    pg = _group("broadcast_object_list", group)
    if pg is None:
        return
    root = _group_rank("broadcast_object_list", pg, src, "src")
    if pg.rank() == root:
        parts = [_to_tensor(o) for o in object_list]
        sizes = kael.tensor([p.numel() for p in parts], dtype=kael.int64)
    else:
        sizes = kael.zeros(len(object_list), dtype=kael.int64)
    Work(_C._dist_broadcast(pg._handle, sizes, root)).wait()
    sizes = sizes.tolist()
    total = sum(sizes)
    payload = (kael.cat(parts) if parts and total else kael.zeros(total, dtype=kael.uint8)) \
        if pg.rank() == root else kael.zeros(total, dtype=kael.uint8)
    Work(_C._dist_broadcast(pg._handle, payload, root)).wait()
    if pg.rank() != root:
        off = 0
        for i, n in enumerate(sizes):
            object_list[i] = _from_tensor(payload[off:off + n], n)
            off += n


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=0, group=None):
    """scatter_object_output_list[0] on rank i = scatter_object_input_list[i] of src."""
    pg = _group("scatter_object_list", group)
    if pg is None:
        return
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("scatter_object_list: scatter_object_output_list must be a list of at least one entry")
    root = _group_rank("scatter_object_list", pg, src, "src")
    if pg.rank() == root:
        if scatter_object_input_list is None or len(scatter_object_input_list) != pg.size():
            raise ValueError(f"scatter_object_list: the source rank needs {pg.size()} input objects")
        parts = [_to_tensor(o) for o in scatter_object_input_list]
        sizes = kael.tensor([p.numel() for p in parts], dtype=kael.int64)
    else:
        sizes = kael.zeros(pg.size(), dtype=kael.int64)
    Work(_C._dist_broadcast(pg._handle, sizes, root)).wait()
    sizes = sizes.tolist()
    m = max(sizes)
    flat = kael.cat([_padded(p, m) for p in parts]) if pg.rank() == root else None
    out = kael.empty(m, dtype=kael.uint8)
    Work(_C._dist_scatter(pg._handle, out, flat, root)).wait()
    scatter_object_output_list[0] = _from_tensor(out, sizes[pg.rank()])

