"""torch.cuda.amp.common's one function."""
from kael import cuda


def amp_definitely_not_available() -> bool:
    """Whether mixed precision on CUDA is certainly unavailable (no CUDA backend or device)."""
    return not cuda.is_available()
