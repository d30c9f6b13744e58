"""kael.cuda.amp.GradScaler: torch's deprecated spelling of kael.amp.GradScaler("cuda", ...)."""
import warnings

from kael.amp.grad_scaler import GradScaler as _GradScaler, OptState  # noqa: F401

__all__ = ["GradScaler"]


class GradScaler(_GradScaler):
    """kael.amp.GradScaler("cuda", ...), deprecated as torch's: constructing one warns with
    FutureWarning. Without CUDA it is a disabled scaler (with kael.amp.GradScaler's UserWarning)."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        warnings.warn("`kael.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`kael.amp.GradScaler('cuda', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cuda", init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)
