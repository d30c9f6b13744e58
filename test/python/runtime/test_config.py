"""kael.__version__ and kael.__config__.show(): the version comes from kael/version.py alone, and
the build facts that show() prints are those of the build that made this kael._C (its CMake
cache), the run-time facts those the loaded oneDNN reports itself (asked through ctypes here)."""
import ctypes
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import kael
import kael.distributed

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT = 120 * float(os.environ.get("KAEL_TEST_TIMEOUT_FACTOR", "1"))


def _build_dir():
    """The build that made the loaded kael._C: the sanitizer builds load a copy of the package
    from inside their own build directory (tools/run_sanitizers.sh); otherwise the developer build."""
    build = (ROOT / "build").resolve()
    loaded = Path(kael._C.__file__).resolve()
    if build in loaded.parents:
        return build / loaded.relative_to(build).parts[0]
    return ROOT / "build" / f"{sys.implementation.cache_tag}-{sysconfig.get_platform()}"


def _cmake_cache():
    """The CMakeCache.txt of the build that made the loaded kael._C, as {name: value}."""
    cache = {}
    for line in (_build_dir() / "CMakeCache.txt").read_text().splitlines():
        if line and not line.startswith(("#", "//")) and "=" in line:
            key, value = line.split("=", 1)
            cache[key.split(":", 1)[0]] = value
    return cache


def _config_in_subprocess(env_changes, code="import kael; print(kael.__config__.show())"):
    env = {k: v for k, v in os.environ.items() if k not in ("KAEL_NUM_THREADS", "OMP_NUM_THREADS",
                                                               "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")}
    env.update(env_changes)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=TIMEOUT,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _line(text, label):
    [line] = [ln for ln in text.splitlines() if ln.strip().startswith(f"- {label}:")]
    return line.split(":", 1)[1].strip()


class _DnnlVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int),
                ("hash", ctypes.c_char_p), ("cpu_runtime", ctypes.c_uint), ("gpu_runtime", ctypes.c_uint)]


def _dnnl():
    lib = ctypes.CDLL("libdnnl.so.3")  # the one kael loaded (same soname, already in the process)
    lib.dnnl_version.restype = ctypes.POINTER(_DnnlVersion)
    lib.dnnl_cpu_isa2str.restype = ctypes.c_char_p
    lib.dnnl_cpu_isa2str.argtypes = [ctypes.c_int]
    lib.dnnl_get_effective_cpu_isa.restype = ctypes.c_int
    return lib


# ---------------------------------------------------------------- the version

def test_version_is_kael_version_py():
    from kael import version
    assert kael.__version__ == version.__version__
    assert kael._C.__version__ == version.__version__  # CMake read the same file at configure time


def test_distribution_metadata_reads_the_same_version():
    # What setuptools writes into the wheel's and sdist's metadata (pyproject.toml's dynamic version).
    from setuptools.config.pyprojecttoml import read_configuration
    config = read_configuration(ROOT / "pyproject.toml", expand=True)
    assert config["project"]["name"] == "kael-tensor"
    assert config["project"]["version"] == kael.__version__


# ---------------------------------------------------------------- build facts from CMake

def test_build_facts_are_those_of_the_cmake_build():
    cache = _cmake_cache()
    config = kael._C._build_config()
    assert config["build_type"] == cache["CMAKE_BUILD_TYPE"]
    assert config["compiler"] == cache["CMAKE_CXX_COMPILER"]
    version = subprocess.run([cache["CMAKE_CXX_COMPILER"], "-dumpfullversion"], capture_output=True, text=True,
                             check=True).stdout.strip()
    assert config["compiler_version"] == version
    # The flags the build compiled this very binding with (CMake's compile_commands.json).
    import json
    import shlex
    [entry] = [e for e in json.loads((_build_dir() / "compile_commands.json").read_text())
               if e["file"].endswith("csrc/build_config.cpp")]
    compiled = shlex.split(entry["command"])
    assert all(flag in compiled for flag in config["cxx_flags"].split()), (config["cxx_flags"], compiled)
    march = [f.removeprefix("-march=") for f in compiled if f.startswith("-march=")]
    assert march == ([config["cpu_arch"]] if config["cpu_arch"] else [])
    assert config["mpi"] == kael.distributed.is_available()
    assert config["mpi"] == ("-DKAEL_HAS_MPI" in compiled)


def test_show_prints_the_build():
    text = kael.__config__.show()
    config = kael._C._build_config()
    assert isinstance(text, str) and text.startswith(f"kael {kael.__version__}\n")
    assert f"{config['compiler_id']} {config['compiler_version']}" in _line(text, "Compiler")
    assert _line(text, "Build type") == config["build_type"]
    assert _line(text, "CXX flags") == config["cxx_flags"]
    assert _line(text, "CPU ISA level") == (f"-march={config['cpu_arch']}" if config["cpu_arch"]
                                            else "baseline (no -march)")
    assert _line(text, "MPI (kael.distributed)").startswith("ON" if kael.distributed.is_available() else "OFF")
    assert _line(text, "CUDA").startswith("OFF" if not config["cuda_kernels"] else "kernels")
    gemm = _line(text, "GEMM")
    assert gemm.startswith("kael's float32 GEMM" if kael._C._gemm_f32_available() else "oneDNN matmul")


def test_gemm_follows_the_isa_level():
    # kael's float32 GEMM is compiled for AVX-512 builds only (aten/src/native/cpu/gemm.cpp).
    config = kael._C._build_config()
    if config["system"].endswith("x86_64"):
        assert kael._C._gemm_f32_available() == (config["cpu_arch"] == "x86-64-v4")


# ---------------------------------------------------------------- oneDNN at run time

def test_onednn_version_and_isa_are_the_loaded_library_s():
    lib = _dnnl()
    v = lib.dnnl_version().contents
    config = kael._C._build_config()
    assert config["dnnl_version"] == f"{v.major}.{v.minor}.{v.patch}"
    assert config["dnnl_hash"] == v.hash.decode()
    assert config["dnnl_cpu_runtime"] == {1: "sequential", 2: "OpenMP", 4: "TBB", 8: "threadpool"}[v.cpu_runtime]
    assert config["dnnl_cpu_isa"] == lib.dnnl_cpu_isa2str(lib.dnnl_get_effective_cpu_isa()).decode()
    assert _line(kael.__config__.show(), "oneDNN ISA at run time") == config["dnnl_cpu_isa"]


def test_onednn_isa_follows_onednn_max_cpu_isa():
    # oneDNN caps its dispatch at ONEDNN_MAX_CPU_ISA; show() reports what it picked, not the CPU's best.
    if not kael._C._build_config()["system"].endswith("x86_64"):
        pytest.skip("ISA names of x86-64 (aarch64's are sve_*)")
    assert _line(_config_in_subprocess({"ONEDNN_MAX_CPU_ISA": "SSE41"}), "oneDNN ISA at run time") == "cpu_isa_sse41"


# ---------------------------------------------------------------- threads and their source

def test_thread_count_from_kael_num_threads():
    assert _line(_config_in_subprocess({"KAEL_NUM_THREADS": "3", "OMP_NUM_THREADS": "5"}), "Threads") == \
        "3 (KAEL_NUM_THREADS=3)"


def test_thread_count_from_omp_num_threads():
    assert _line(_config_in_subprocess({"OMP_NUM_THREADS": "5"}), "Threads") == "5 (OMP_NUM_THREADS=5)"


def test_thread_count_default_is_the_available_cpus():
    cpus = len(os.sched_getaffinity(0))
    assert _line(_config_in_subprocess({}), "Threads") == f"{cpus} (default: the CPUs this process may run on)"


def test_thread_count_set_by_set_num_threads():
    code = "import kael; kael.set_num_threads(7); print(kael.__config__.show())"
    assert _line(_config_in_subprocess({"KAEL_NUM_THREADS": "2"}, code), "Threads") == "7 (kael.set_num_threads())"
