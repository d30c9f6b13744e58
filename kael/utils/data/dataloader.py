"""kael.utils.data.dataloader: DataLoader and its helpers (torch.utils.data.dataloader's names)."""
from kael.data import DataLoader, default_collate, default_convert, get_worker_info  # noqa: F401
