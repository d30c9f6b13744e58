"""How this kael was built and what it runs on, as torch.__config__.

>>> import kael
>>> print(kael.__config__.show())       # doctest: +SKIP

The build facts (compiler, flags, -march level, build type, the oneDNN it was compiled against,
MPI, CUDA kernels) come from CMake: a header written at configure time and read by
kael._C._build_config() (csrc/build_config.cpp). oneDNN's own version and the ISA its kernels
dispatch to are asked of the library loaded at run time, the thread count of kael's runtime.
"""
from __future__ import annotations

import os

__all__ = ["show", "parallel_info"]

_THREAD_VARIABLES = ("KAEL_NUM_THREADS", "OMP_NUM_THREADS")


def _available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _positive_int(text: str | None) -> int | None:
    """The first value of an OpenMP-style list ("4" or "4,2"), if it is a positive integer."""
    if not text:
        return None
    first = text.split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) > 0 else None


def _thread_source(threads: int) -> str:
    """Where kael's thread count comes from (kael's runtime reads KAEL_NUM_THREADS, else takes
    OpenMP's default, which is OMP_NUM_THREADS when set, else the CPUs this process may use)."""
    kael_threads = _positive_int(os.environ.get("KAEL_NUM_THREADS"))
    if kael_threads is not None and "," not in os.environ["KAEL_NUM_THREADS"]:
        expected, source = kael_threads, f"KAEL_NUM_THREADS={os.environ['KAEL_NUM_THREADS']}"
    elif _positive_int(os.environ.get("OMP_NUM_THREADS")) is not None:
        expected, source = _positive_int(os.environ["OMP_NUM_THREADS"]), \
            f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}"
    else:
        expected, source = _available_cpus(), "default: the CPUs this process may run on"
    if threads != expected:
        return "kael.set_num_threads()"
    return source


def _gemm(available: bool) -> str:
    if available:
        return "kael's float32 GEMM (AVX-512, on kael's thread pool); other dtypes: oneDNN matmul"
    return "oneDNN matmul (kael's float32 GEMM needs an AVX-512 build)"


def parallel_info() -> str:
    """The thread settings of kael's runtime and where they come from."""
    from kael import _C
    threads = _C.get_num_threads()
    lines = [f"kael threads: {threads} ({_thread_source(threads)})"]
    for name in _THREAD_VARIABLES + ("OMP_WAIT_POLICY", "ONEDNN_MAX_CPU_ISA"):
        lines.append(f"  {name}: {os.environ.get(name, '(not set)')}")
    lines.append(f"  CPUs available: {_available_cpus()}")
    return "\n".join(lines) + "\n"


def show() -> str:
    """A description of this build of kael and of what it found at run time (a string, as
    torch.__config__.show() returns)."""
    from kael import _C
    c = _C._build_config()
    threads = _C.get_num_threads()
    mpi = f"ON (MPI {c['mpi_version']})" if c["mpi"] else "OFF"
    cuda = "kernels compiled, no device runtime" if c["cuda_kernels"] else "OFF"
    arch = f"-march={c['cpu_arch']}" if c["cpu_arch"] else "baseline (no -march)"
    lines = [
        f"kael {c['version']}",
        f"  - Compiler: {c['compiler_id']} {c['compiler_version']} ({c['compiler']}), "
        f"CMake {c['cmake_version']}, for {c['system']}",
        f"  - Build type: {c['build_type']}",
        f"  - CXX flags: {c['cxx_flags']}",
        f"  - CPU ISA level: {arch}",
        f"  - Sanitizers: {c['sanitizers'] or 'none'}",
        f"  - oneDNN: {c['dnnl_version']} (git {c['dnnl_hash'] or '?'}), compiled against "
        f"{c['dnnl_build_version']}, threading: {c['dnnl_cpu_runtime']}",
        f"  - oneDNN ISA at run time: {c['dnnl_cpu_isa']}",
        f"  - GEMM: {_gemm(_C._gemm_f32_available())}",
        f"  - MPI (kael.distributed): {mpi}",
        f"  - CUDA: {cuda}",
        f"  - Threads: {threads} ({_thread_source(threads)})",
    ]
    return "\n".join(lines) + "\n"
