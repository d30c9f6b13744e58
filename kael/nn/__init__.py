"""kael.nn: neural-network building blocks (functional forms in kael.nn.functional)."""
from kael.nn import functional  # noqa: F401
