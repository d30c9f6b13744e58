"""torch.nn.modules.fold's path: the classes of kael.nn.modules torch keeps there."""
from kael.nn.modules._torch_paths import export

__all__ = export(globals(), "fold")
del export
