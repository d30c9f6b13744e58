"""kael.nn.utils: gradient clipping."""
from kael.nn.utils.clip_grad import clip_grad_norm_, clip_grad_value_  # noqa: F401

__all__ = ["clip_grad_norm_", "clip_grad_value_"]
