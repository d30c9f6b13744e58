"""kael.backends.mps: Apple's Metal backend, which kael does not have."""
__all__ = ["is_available", "is_built", "is_macos_or_newer"]


def is_built() -> bool:
    """Whether kael was built with MPS support (never)."""
    return False


def is_available() -> bool:
    """Whether MPS can be used (never)."""
    return False


def is_macos_or_newer(major: int, minor: int) -> bool:
    """Whether MPS runs on macOS major.minor or newer (False without MPS)."""
    return False
