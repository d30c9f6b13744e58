"""DistributedDataParallel: torch.nn.parallel.DistributedDataParallel on kael.distributed.

Note [DDP buckets]
At construction the parameters (and buffers) of rank 0 are broadcast to every rank, and the
parameters that require grad are laid out in buckets: in reverse registration order (the order
backward usually produces their gradients), one dtype per bucket, at most bucket_cap_mb each,
the first at most 1 MB so that communication starts early (torch's layout). A hook on each
parameter copies its accumulated gradient (.grad plus the new one) into its bucket slot; when
every slot of a bucket is filled, the bucket's all_reduce (AVG) is issued asynchronously, in
bucket order on every rank (a bucket ready early waits for the ones before it), so the MPI
library sums it on the communication thread while backward goes on. A callback the autograd
engine runs when backward ends (kael._C._queue_callback) issues what is left, waits for every
bucket and copies the averages into .grad.

find_unused_parameters=True: at the end of backward the slots of the parameters that got no
gradient are filled (their .grad, or zeros), and a used-map is all-reduced so that a parameter no
rank used keeps .grad None, as in torch. Without it a parameter that got no gradient leaves its
bucket unfinished, and the next forward raises torch's error naming it.
"""

from __future__ import annotations

import contextlib
import time

import kael
from kael.nn.modules.module import Module

_FIRST_BUCKET_BYTES = 1024 * 1024


class _Bucket:
    __slots__ = ("params", "offsets", "flat", "pending", "ready", "work", "index")

    def __init__(self, index, params, dtype):
        self.index = index
        self.params = params
        self.offsets = []
        n = 0
        for p in params:
            self.offsets.append(n)
            n += p.numel()
        self.flat = kael.zeros(n, dtype=dtype)
        self.pending = len(params)
        self.ready = [False] * len(params)
        self.work = None


class DistributedDataParallel(Module):
    """Data parallelism over the ranks of a process group (Note [DDP buckets]).

    module: the model (its parameters and buffers are broadcast from rank 0 here). bucket_cap_mb:
    the size of a gradient bucket (default 25). find_unused_parameters: allow parameters that
    get no gradient in an iteration. broadcast_buffers: broadcast rank 0's buffers before each
    forward. device_ids / output_device: accepted for torch's signature (CPU only)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, init_sync=True):
        super().__init__()
        import kael.distributed as dist
        self._dist = dist
        if not dist.is_initialized():
            raise RuntimeError("DistributedDataParallel: Default process group has not been initialized, please "
                               "make sure to call init_process_group.")
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: module must be a kael.nn.Module, got {type(module).__name__}")
        self.module = module
        self.process_group = process_group
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self.bucket_cap_mb = 25 if bucket_cap_mb is None else bucket_cap_mb
        if self.bucket_cap_mb <= 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got {bucket_cap_mb}")
        seen = set()
        self._params = []
        self._param_names = []
        for name, p in module.named_parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                self._params.append(p)
                self._param_names.append(name)
        self._index = {id(p): i for i, p in enumerate(self._params)}
        if init_sync:
            self._broadcast_coalesced(list(module.parameters()) + list(module.buffers()))
        self._build_buckets()
        self._hooks = [p.register_hook(self._make_hook(i)) for i, p in enumerate(self._params)]
        self._sync_this_iter = False
        self._callback_queued = False
        self._unfinished = None  # names of the parameters that got no grad in the last iteration
        self._used = [False] * len(self._params)
        self._next_bucket = 0
        self._last_wait_s = 0.0

    # ------------------------------------------------------------ set-up
    def _broadcast_coalesced(self, tensors):
        by_dtype = {}
        for t in tensors:
            by_dtype.setdefault(t.dtype, []).append(t)
        with kael.no_grad():
            for dtype, ts in by_dtype.items():
                flat = kael.cat([t.detach().reshape(-1) for t in ts])
                self._dist.broadcast(flat, src=self._global_rank0(), group=self.process_group)
                off = 0
                for t in ts:
                    n = t.numel()
                    t.copy_(flat[off:off + n].view(t.shape))
                    off += n

    def _global_rank0(self):
        return 0 if self.process_group is None else self._dist.get_global_rank(self.process_group, 0)

    def _build_buckets(self):
        cap = int(self.bucket_cap_mb * 1024 * 1024)
        self._buckets = []
        self._where = [None] * len(self._params)  # param index -> (bucket, slot)
        open_by_dtype = {}
        for i in reversed(range(len(self._params))):
            p = self._params[i]
            nbytes = p.numel() * p.element_size()
            cur = open_by_dtype.get(p.dtype)
            limit = _FIRST_BUCKET_BYTES if not self._buckets and cur is None else cap
            if cur is None or (cur[1] and cur[2] + nbytes > limit):
                cur = [p.dtype, [], 0, limit]
                open_by_dtype[p.dtype] = cur
                self._buckets.append(cur)
            cur[1].append(i)
            cur[2] += nbytes
            if cur[2] >= cur[3]:
                open_by_dtype.pop(p.dtype)
        built = []
        for b, (dtype, idxs, _, _) in enumerate(self._buckets):
            bucket = _Bucket(b, [self._params[i] for i in idxs], dtype)
            for slot, i in enumerate(idxs):
                self._where[i] = (bucket, slot)
            built.append(bucket)
        self._buckets = built

    # ------------------------------------------------------------ forward
    def forward(self, *inputs, **kwargs):
        if self._unfinished:
            names = self._unfinished
            self._unfinished = None
            indices = " ".join(str(self._param_names.index(n)) for n in names)
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting a new one. This error "
                "indicates that your module has parameters that were not used in producing loss. You can enable "
                "unused parameter detection by passing the keyword argument `find_unused_parameters=True` to "
                "`kael.nn.parallel.DistributedDataParallel`, and by making sure all `forward` function outputs "
                "participate in calculating loss.\nParameter indices which did not receive grad for rank "
                f"{self._dist.get_rank()}: {indices}\nParameters which did not receive grad for rank "
                f"{self._dist.get_rank()}: {', '.join(names)}")
        if self.broadcast_buffers and self.require_forward_param_sync:
            buffers = list(self.module.buffers())
            if buffers:
                self._broadcast_coalesced(buffers)
        if kael.is_grad_enabled():
            self._prepare_for_backward()
        return self.module(*inputs, **kwargs)

    def _prepare_for_backward(self):
        self._sync_this_iter = self.require_backward_grad_sync
        self._callback_queued = False
        self._next_bucket = 0
        self._used = [False] * len(self._params)
        for b in self._buckets:
            b.pending = len(b.params)
            b.ready = [False] * len(b.params)
            b.work = None

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients accumulate locally inside the block; the first backward after it all-reduces
        the accumulated sum."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    # ------------------------------------------------------------ backward
    def _make_hook(self, i):
        def hook(grad):
            if not self._sync_this_iter:
                return None
            if not self._callback_queued:
                self._callback_queued = True
                kael._C._queue_callback(self._finalize)
            self._mark_ready(i, grad)
            return None
        return hook

    def _mark_ready(self, i, grad):
        bucket, slot = self._where[i]
        if bucket.ready[slot]:
            raise RuntimeError(
                f"DistributedDataParallel: parameter {self._param_names[i]} got a second gradient in one iteration "
                "(a second backward without a forward in between): run forward again before each backward")
        p = self._params[i]
        self._used[i] = True
        off, n = bucket.offsets[slot], p.numel()
        dst = bucket.flat[off:off + n]
        with kael.no_grad():
            if p.grad is None:
                dst.copy_(grad.reshape(-1))
            else:  # after no_sync(): the sum accumulated so far, plus this gradient
                dst.copy_(p.grad.reshape(-1))
                dst.add_(grad.reshape(-1))
        bucket.ready[slot] = True
        bucket.pending -= 1
        if bucket.pending == 0:
            self._launch_ready()

    def _launch_ready(self):
        while self._next_bucket < len(self._buckets) and self._buckets[self._next_bucket].pending == 0:
            b = self._buckets[self._next_bucket]
            b.work = self._dist.all_reduce(b.flat, op=self._dist.ReduceOp.AVG, group=self.process_group,
                                           async_op=True)
            self._next_bucket += 1

    def _finalize(self):
        self._sync_this_iter = False
        globally_used = None
        if self.find_unused_parameters:
            for b in self._buckets:
                if b.pending == 0:
                    continue
                for slot, p in enumerate(b.params):
                    if not b.ready[slot]:
                        off, n = b.offsets[slot], p.numel()
                        with kael.no_grad():
                            if p.grad is None:
                                b.flat[off:off + n].zero_()
                            else:
                                b.flat[off:off + n].copy_(p.grad.reshape(-1))
                        b.ready[slot] = True
                b.pending = 0
            self._launch_ready()
            used = kael.tensor([1 if u else 0 for u in self._used], dtype=kael.int32)
            self._dist.all_reduce(used, op=self._dist.ReduceOp.MAX, group=self.process_group)
            globally_used = used.tolist()
        t0 = time.perf_counter()
        for b in self._buckets[:self._next_bucket]:
            b.work.wait()
        # what backward waited for communication: the part of it that computation did not hide
        self._last_wait_s = time.perf_counter() - t0
        if self._next_bucket < len(self._buckets):
            self._unfinished = [self._param_names[self._index[id(p)]] for b in self._buckets[self._next_bucket:]
                                for slot, p in enumerate(b.params) if not b.ready[slot]]
        with kael.no_grad():
            for b in self._buckets[:self._next_bucket]:
                for slot, p in enumerate(b.params):
                    i = self._index[id(p)]
                    if globally_used is not None and not globally_used[i] and p.grad is None:
                        continue
                    off, n = b.offsets[slot], p.numel()
                    avg = b.flat[off:off + n].view(p.shape)
                    if p.grad is None:
                        p.grad = avg.clone()
                    else:
                        p.grad.copy_(avg)

    def __getstate__(self):
        raise TypeError("DistributedDataParallel cannot be pickled; pickle its .module")

