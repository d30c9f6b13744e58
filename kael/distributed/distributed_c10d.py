"""kael.distributed.distributed_c10d: the module torch programs import the collectives from
(torch.distributed.distributed_c10d); the same objects as kael.distributed."""
from kael.distributed import *  # noqa: F401,F403
from kael.distributed import GroupMember, ProcessGroup, Work, default_pg_timeout  # noqa: F401
