"""kael.backends.opt_einsum: torch.einsum's use of the opt_einsum package to order its
contractions. kael's einsum contracts left to right and never uses it; the switches are kept
as torch reports them where opt_einsum is not installed."""
import importlib.util as _util

__all__ = ["enabled", "get_opt_einsum", "is_available", "strategy"]


def is_available() -> bool:
    """Whether the opt_einsum package is installed."""
    return _util.find_spec("opt_einsum") is not None


def get_opt_einsum():
    """The opt_einsum module, or None where it is not installed."""
    if not is_available():
        return None
    import opt_einsum

    return opt_einsum


enabled = is_available()
strategy = "auto" if is_available() else None
