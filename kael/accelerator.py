"""kael.accelerator: the device-neutral questions PyTorch code asks before it picks a device, as
torch.accelerator answers them. PyTorch's tutorials start with

    device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"

kael's one accelerator is CUDA (kael.cuda): where this build has no CUDA backend there is none,
and the calls that need one raise RuntimeError with torch's message."""
from __future__ import annotations

from kael import cuda

__all__ = ["current_accelerator", "current_device_index", "device_count", "is_available", "set_device_index"]

_NONE = "Cannot access accelerator device when none is available."


def is_available() -> bool:
    """Whether an accelerator is available (kael: a CUDA backend and its device)."""
    return cuda.is_available()


def current_accelerator(check_available: bool = False):
    """The accelerator's device type as a kael.device (device(type='cuda')), or None where there
    is none; with check_available, None too where the accelerator is built but unusable."""
    from kael._tensor import device

    if not is_available():
        return None
    return device("cuda")


def device_count() -> int:
    """The number of accelerator devices (0 without one)."""
    return cuda.device_count() if is_available() else 0


def _require() -> None:
    if not is_available():
        raise RuntimeError(_NONE)


def _index(dev) -> int:
    """The device index named by an int, a string ("cuda", "cuda:0") or a kael.device."""
    from kael._tensor import device

    if isinstance(dev, bool) or not isinstance(dev, (int, str, device)):
        raise TypeError(f"accelerator: expected a device, a device string or an int, got {type(dev).__name__}")
    if isinstance(dev, int):
        index = dev
    else:
        d = device(dev) if isinstance(dev, str) else dev
        if d.type != "cuda":
            raise ValueError(f"accelerator: {d.type!r} doesn't match the current accelerator 'cuda'")
        index = 0 if d.index is None else d.index
    if not 0 <= index < device_count():
        raise ValueError(f"accelerator: invalid device index {index} (kael drives {device_count()} device)")
    return index


def current_device_index() -> int:
    """The index of the current accelerator device (kael drives one: 0)."""
    _require()
    return 0


def set_device_index(device, /) -> None:
    """Makes `device` current; kael drives one device, so only index 0 (or None: no change) is
    accepted."""
    _require()
    if device is not None:
        _index(device)

