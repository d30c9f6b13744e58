"""What kael.distributed.run starts on each rank: torchrun's environment variables from Open
MPI's, then the program as __main__ (python -m kael.distributed._bootstrap [-m] program args...)."""
import runpy
import sys

from kael.distributed import _set_torchrun_env


def main():
    _set_torchrun_env()
    args = sys.argv[1:]
    if args and args[0] == "-m":
        sys.argv = args[1:]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = args
        runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__":
    main()
