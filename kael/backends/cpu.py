"""kael.backends.cpu: what the CPU backend was built for."""
__all__ = ["get_cpu_capability"]


def get_cpu_capability() -> str:
    """The widest vector instruction set kael's kernels use on this CPU ("AVX512", "AVX2" or
    "DEFAULT"), as torch.backends.cpu reports its own."""
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        return "DEFAULT"
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "AVX512"
    if {"avx2", "fma"} <= flags:
        return "AVX2"
    return "DEFAULT"
