"""kael.cpu: torch.cpu's device questions for the CPU (always there, one device, nothing to
synchronize) and its deprecated amp namespace (kael.cpu.amp.autocast)."""
from __future__ import annotations

from kael.cpu import amp  # noqa: F401

__all__ = ["amp", "current_device", "device_count", "is_available", "synchronize"]


def is_available() -> bool:
    """The CPU is always available."""
    return True


def device_count() -> int:
    """One CPU device."""
    return 1


def current_device() -> str:
    """'cpu', as torch.cpu.current_device()."""
    return "cpu"


def synchronize(device=None) -> None:
    """Nothing to wait for: CPU ops finish before they return."""
    return None
