"""kael.nn: neural-network building blocks (kael.nn.functional holds the stateless ops)."""
from kael.nn import functional  # noqa: F401
