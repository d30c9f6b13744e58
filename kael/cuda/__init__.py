"""kael.cuda: what PyTorch code asks of torch.cuda before (or instead of) moving tensors to a GPU.

kael drives at most one CUDA device (cuda:0). In a build without a CUDA backend every call
answers as torch.cuda answers in PyTorch's CPU-only build: the questions answer "none"
(is_available() False, device_count() 0, memory counters 0), the seeding calls are recorded
and do nothing, and the calls that need a device raise AssertionError("kael not compiled with
CUDA enabled"), PyTorch's class and message with kael's name (docs/decisions/namespaces.md).
"""
from __future__ import annotations

import collections as _collections

from kael import _C

__all__ = ["amp", "can_device_access_peer", "current_device", "current_stream", "default_stream", "device",
           "device_count", "device_of", "get_gencode_flags", "is_tf32_supported", "stream", "empty_cache", "get_arch_list", "get_device_capability",
           "get_device_name", "get_device_properties", "get_rng_state", "get_rng_state_all", "init", "initial_seed",
           "ipc_collect", "is_available", "is_bf16_supported", "is_initialized", "manual_seed", "manual_seed_all",
           "max_memory_allocated", "max_memory_reserved", "mem_get_info", "memory_allocated", "memory_reserved",
           "memory_stats", "reset_max_memory_allocated", "reset_peak_memory_stats", "seed", "seed_all", "set_device",
           "set_rng_state", "set_rng_state_all", "synchronize"]

_NOT_COMPILED = "kael not compiled with CUDA enabled"


def is_available() -> bool:
    """Whether this build of kael has a CUDA backend (False on a CPU-only build)."""
    return bool(_C.cuda_is_available())


def device_count() -> int:
    """The number of CUDA devices kael can use: 0 without a CUDA backend, else 1 (kael drives
    one device, cuda:0)."""
    return 1 if is_available() else 0


def _require(name: str) -> None:
    """The check of every call that needs a device: AssertionError without a CUDA backend;
    with one, the backend does not yet expose this call (docs/decisions/devices.md)."""
    if not is_available():
        raise AssertionError(_NOT_COMPILED)
    raise NotImplementedError(f"kael.cuda.{name}: this build's CUDA backend does not provide it yet")


def _device_index(dev, optional: bool = False) -> int:
    """The index a device argument names (an int, 'cuda', 'cuda:1', a kael.device); -1 for
    'no device' and None where optional."""
    from kael._tensor import device as _device

    if dev is None:
        if optional:
            return -1
        raise ValueError("Expected a cuda device, but got: None")
    if isinstance(dev, bool):
        raise TypeError("Expected a cuda device, but got: bool")
    if isinstance(dev, int):
        return dev
    if isinstance(dev, str):
        dev = _device(dev)
    if not isinstance(dev, _device):
        raise ValueError(f"Expected a cuda device, but got: {dev!r}")
    if dev.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {dev}")
    return -1 if dev.index is None and optional else (dev.index or 0)


# ---------------------------------------------------------------- initialisation, devices

def is_initialized() -> bool:
    """Whether kael's CUDA state has been initialised (never without a backend)."""
    return False


def init() -> None:
    """Initialises CUDA; raises without a backend."""
    if not is_available():
        raise AssertionError(_NOT_COMPILED)


def current_device() -> int:
    """The index of the current device (kael drives one: 0)."""
    if not is_available():
        raise AssertionError(_NOT_COMPILED)
    return 0


def set_device(device) -> None:
    """Makes `device` current. A negative index is a no-op, as in torch; kael drives one device,
    so with a backend only index 0 is accepted."""
    index = _device_index(device)
    if index < 0:
        return
    if not is_available():
        raise AssertionError(_NOT_COMPILED)
    if index != 0:
        raise ValueError(f"set_device: invalid device index {index} (kael drives {device_count()} device)")


class device:
    """Context manager that makes a device current for a block; a negative index or None is a
    no-op. Entering one for a real index raises RuntimeError without a backend, as torch's does."""

    def __init__(self, device) -> None:
        self.idx = _device_index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self) -> None:
        if self.idx < 0:
            return
        if not is_available():
            raise RuntimeError("kael was compiled without CUDA support")
        self.prev_idx = 0
        set_device(self.idx)

    def __exit__(self, *exc: object) -> bool:
        return False


def synchronize(device=None) -> None:
    """Waits for the device's work to finish."""
    if not is_available():
        raise AssertionError(_NOT_COMPILED)
    _require("synchronize")


def get_device_name(device=None) -> str:
    """The device's name."""
    _require("get_device_name")
    return ""


def get_device_capability(device=None) -> tuple:
    """The device's compute capability (major, minor)."""
    _require("get_device_capability")
    return (0, 0)


def get_device_properties(device=None):
    """The device's properties."""
    _require("get_device_properties")


def get_arch_list() -> list:
    """The CUDA architectures this build was compiled for (none without a backend)."""
    return []


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether the device supports bfloat16 (False without a device)."""
    return False


def is_tf32_supported() -> bool:
    """Whether the device can compute float32 products in TF32 (False without a device)."""
    return False


def get_gencode_flags() -> str:
    """The nvcc -gencode flags this build was compiled with ('' without a backend)."""
    return ""


def can_device_access_peer(device, peer_device) -> bool:
    """Whether `device` can read `peer_device`'s memory directly."""
    _require("can_device_access_peer")
    return False


class device_of(device):
    """Context manager that makes a tensor's CUDA device current; a no-op for a CPU tensor."""

    def __init__(self, obj) -> None:
        super().__init__(obj.get_device() if obj.device.type == "cuda" else -1)


class stream:
    """Context manager that makes a stream current; stream(None) is a no-op (kael has no streams
    without a CUDA backend, so any other stream raises)."""

    def __init__(self, stream) -> None:
        if stream is not None:
            _require("stream")
        self.stream = stream

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


def current_stream(device=None):
    """The device's current stream."""
    _require("current_stream")


def default_stream(device=None):
    """The device's default stream."""
    _require("default_stream")


def ipc_collect() -> None:
    """Frees the CUDA memory shared with other processes after they released it."""
    _require("ipc_collect")


# ---------------------------------------------------------------- memory

def _allocator_counter(name: str, device) -> int:
    if not is_available():
        return 0
    _require(name)
    return 0


def empty_cache() -> None:
    """Returns the cached, unused device memory to the driver (nothing to do without a backend)."""
    if is_available():
        _require("empty_cache")


def memory_allocated(device=None) -> int:
    """Bytes of device memory held by tensors (0 without a backend)."""
    return _allocator_counter("memory_allocated", device)


def max_memory_allocated(device=None) -> int:
    """The peak of memory_allocated since the start or the last reset (0 without a backend)."""
    return _allocator_counter("max_memory_allocated", device)


def memory_reserved(device=None) -> int:
    """Bytes of device memory the caching allocator holds (0 without a backend)."""
    return _allocator_counter("memory_reserved", device)


def max_memory_reserved(device=None) -> int:
    """The peak of memory_reserved (0 without a backend)."""
    return _allocator_counter("max_memory_reserved", device)


def memory_stats(device=None) -> dict:
    """The caching allocator's statistics (empty without a backend)."""
    if not is_available():
        return _collections.OrderedDict()
    _require("memory_stats")
    return _collections.OrderedDict()


def reset_peak_memory_stats(device=None) -> None:
    """Resets the peaks the memory counters track; raises without a backend (torch's CPU build
    raises there too, see docs/decisions/namespaces.md)."""
    _require("reset_peak_memory_stats")


def reset_max_memory_allocated(device=None) -> None:
    """Deprecated name of reset_peak_memory_stats, with torch's FutureWarning."""
    import warnings

    warnings.warn("kael.cuda.reset_max_memory_allocated now calls kael.cuda.reset_peak_memory_stats, which resets "
                  "/all/ peak memory stats.", FutureWarning, stacklevel=2)
    reset_peak_memory_stats(device)


def mem_get_info(device=None) -> tuple:
    """(free, total) bytes of device memory."""
    _require("mem_get_info")
    return (0, 0)


# ---------------------------------------------------------------- random numbers
# torch queues these until CUDA initialises, which a CPU-only build never does: the seed is
# recorded (initial_seed still raises) and nothing else happens.

_queued_seed: int | None = None


def manual_seed(seed) -> None:
    """Seeds the current device's generator (recorded; applied when a device exists)."""
    global _queued_seed
    _queued_seed = int(seed)


def manual_seed_all(seed) -> None:
    """Seeds every device's generator (recorded; applied when a device exists)."""
    global _queued_seed
    _queued_seed = int(seed)


def seed() -> None:
    """Seeds the current device's generator with a random number (nothing without a device)."""


def seed_all() -> None:
    """Seeds every device's generator with a random number (nothing without a device)."""


def initial_seed() -> int:
    """The current device generator's initial seed."""
    _require("initial_seed")
    return 0


def get_rng_state(device="cuda"):
    """The device generator's state."""
    _require("get_rng_state")


def get_rng_state_all() -> list:
    """The state of every device's generator (one per device: none without a backend)."""
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state(new_state, device="cuda") -> None:
    """Sets the device generator's state (recorded and dropped without a device, as torch)."""
    if is_available():
        _require("set_rng_state")


def set_rng_state_all(new_states) -> None:
    """Sets every device generator's state."""
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


# the legacy tensor types of CUDA tensors (kael.cuda.FloatTensor, ...): isinstance is False
# and construction raises TypeError without a CUDA backend
from kael._legacy import CUDA_TYPES as _CUDA_TYPES  # noqa: E402

globals().update(_CUDA_TYPES)
__all__ += sorted(_CUDA_TYPES)

from kael.cuda import amp  # noqa: E402  (after the functions: kael.amp asks is_available)
