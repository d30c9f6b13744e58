"""torch.nn.modules.upsampling's path: the classes of kael.nn.modules torch keeps there."""
from kael.nn.modules._torch_paths import export

__all__ = export(globals(), "upsampling")
del export
