"""Install commands work any number of times in any order. `pip install .` configures
build/temp.*/cmake with the cmake and ninja of an isolated environment that pip deletes when it
is done; the next install must still configure and build that tree with its own tools. These
tests run setup.py's configure step the way successive installs do, with the first
environment's tools deleted in between (the full `pip install .` sequence takes minutes of
compiling; docs/build.md records it run by hand)."""
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def setup_py():
    spec = importlib.util.spec_from_file_location("kael_setup_under_test", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not __main__: defines the helpers without calling setup()
    return module


def options():
    return [f"-DPython3_EXECUTABLE={sys.executable}", f"-Ddnnl_DIR={ROOT / '.venv' / 'lib' / 'cmake' / 'dnnl'}",
            "-DKAEL_BUILD_PYTHON=OFF", "-DCMAKE_BUILD_TYPE=Release"]


def throwaway_environment(path, setup_py):
    """A directory with its own ninja (a copy) and cmake (a link), like pip's build environment."""
    bin_dir = path / "bin"
    bin_dir.mkdir(parents=True)
    ninja = bin_dir / "ninja"
    shutil.copy2(setup_py.build_tool("ninja"), ninja)
    cmake = bin_dir / "cmake"
    cmake.symlink_to(setup_py.build_tool("cmake"))
    return str(cmake), str(ninja)


def cached(build, name):
    for line in (build / "CMakeCache.txt").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split("=", 1)[1]
    return None


def build_runs(build, cmake):
    # rebuild_cache runs ninja, which runs the cmake that build.ninja names: both must exist
    return subprocess.run([cmake, "--build", str(build), "--target", "rebuild_cache"], capture_output=True,
                          text=True)


def test_tools_are_taken_from_the_running_environment(setup_py):
    for name in ("cmake", "ninja"):
        tool = Path(setup_py.build_tool(name))
        assert tool.exists() and os.access(tool, os.X_OK)
        assert str(tool).startswith(sys.prefix), tool  # the venv's, not whatever PATH finds first


def test_configure_again_after_the_first_environment_is_gone(setup_py, tmp_path):
    build = tmp_path / "build"
    cmake_a, ninja_a = throwaway_environment(tmp_path / "env-a", setup_py)
    setup_py.configure(build, cmake_a, ninja_a, options())
    assert cached(build, "CMAKE_MAKE_PROGRAM") == ninja_a
    shutil.rmtree(tmp_path / "env-a")  # what pip does after the first install

    cmake_b, ninja_b = throwaway_environment(tmp_path / "env-b", setup_py)
    setup_py.configure(build, cmake_b, ninja_b, options())
    assert cached(build, "CMAKE_MAKE_PROGRAM") == ninja_b
    result = build_runs(build, cmake_b)
    assert result.returncode == 0, result.stdout + result.stderr
    shutil.rmtree(tmp_path / "env-b")

    # and then a developer install's tools, and an isolated one again
    cmake, ninja = setup_py.build_tool("cmake"), setup_py.build_tool("ninja")
    setup_py.configure(build, cmake, ninja, options())
    assert build_runs(build, cmake).returncode == 0
    cmake_c, ninja_c = throwaway_environment(tmp_path / "env-c", setup_py)
    setup_py.configure(build, cmake_c, ninja_c, options())
    assert build_runs(build, cmake_c).returncode == 0


def test_a_tree_the_tools_cannot_configure_is_configured_from_a_new_cache(setup_py, tmp_path):
    # a cache CMake refuses (another generator's) stands for any stale cache: configure starts over
    build = tmp_path / "build"
    cmake = setup_py.build_tool("cmake")
    subprocess.run([cmake, "-S", str(ROOT), "-B", str(build), "-G", "Unix Makefiles", *options()], check=True,
                   capture_output=True)
    assert cached(build, "CMAKE_GENERATOR") == "Unix Makefiles"
    setup_py.configure(build, cmake, setup_py.build_tool("ninja"), options())
    assert cached(build, "CMAKE_GENERATOR") == "Ninja"
    assert build_runs(build, cmake).returncode == 0
