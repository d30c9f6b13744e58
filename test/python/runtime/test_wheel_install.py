"""Installing kael like a PyTorch user: tools/build_wheel.sh builds the wheel from the developer
build (KAEL_BUILD_DIR, an incremental build) and repairs it into a manylinux wheel; the wheel goes
into a fresh virtual environment with its dependencies from the package index (numpy,
onednn-cpu-gomp), and a smoke test runs there from a directory outside the source tree, with no
compiler on PATH: kael must import from the installed wheel, find oneDNN in that environment, and
run ops, autograd, nn, safetensors and the tokenizer (tools/wheel_smoke.py) and 20 steps of the
char-LM demo.

About a minute on the 2-core development machine (the venv and the install take most of it)."""
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import kael

ROOT = Path(__file__).resolve().parents[3]
BUILD_DIR = ROOT / "build" / f"{sys.implementation.cache_tag}-{sysconfig.get_platform()}"
TIMEOUT = 600 * float(os.environ.get("KAEL_TEST_TIMEOUT_FACTOR", "1"))


def _run(command, **kwargs):
    proc = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, **kwargs)
    assert proc.returncode == 0, f"{command} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    assert (BUILD_DIR / "CMakeCache.txt").exists(), f"no developer build in {BUILD_DIR} (pip install -e .)"
    out = tmp_path_factory.mktemp("wheelhouse")
    env = dict(os.environ, KAEL_BUILD_DIR=str(BUILD_DIR), KAEL_WHEEL_DIR=str(out), PYTHON=sys.executable)
    _run(["bash", str(ROOT / "tools" / "build_wheel.sh")], cwd=ROOT, env=env)
    [built] = out.glob("kael_tensor-*.whl")
    return built


def test_wheel_is_a_manylinux_wheel_of_every_package(wheel):
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert wheel.name.startswith(f"kael_tensor-{kael.__version__}-{tag}-{tag}-manylinux_")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        metadata = zf.read(f"kael_tensor-{kael.__version__}.dist-info/METADATA").decode()
    # every package of the source tree, with its data
    packages = {str(p.parent.relative_to(ROOT)) for p in (ROOT / "kael").rglob("__init__.py")
                if "__pycache__" not in p.parts}
    missing = {p for p in packages if f"{p}/__init__.py" not in names}
    assert not missing, f"packages missing from the wheel: {sorted(missing)}"
    extension = [n for n in names if n.startswith("kael/_C.") and n.endswith(".so")]
    assert len(extension) == 1 and "kael/_C.pyi" in names
    assert "kael/data/tinyshakespeare.txt" in names and "kael/version.py" in names
    # oneDNN and OpenMP are not vendored: they come from onednn-cpu-gomp (docs/decisions/wheel.md)
    assert not [n for n in names if "libdnnl" in n or "libgomp" in n]
    lines = metadata.splitlines()
    assert "Name: kael-tensor" in lines and f"Version: {kael.__version__}" in lines
    # x86-64 takes oneDNN from its PyPI wheel (aarch64 release wheels vendor it: pyproject.toml)
    assert 'Requires-Dist: onednn-cpu-gomp==2023.2.0; platform_machine == "x86_64"' in lines
    # no path of the build machine: the extension looks in <prefix>/lib of its environment
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    import io
    with zipfile.ZipFile(wheel) as zf:
        elf = ELFFile(io.BytesIO(zf.read(extension[0])))
        dynamic = next(s for s in elf.iter_sections() if isinstance(s, DynamicSection))
        runpath = [t.runpath for t in dynamic.iter_tags() if t.entry.d_tag == "DT_RUNPATH"]
        rpath = [t.rpath for t in dynamic.iter_tags() if t.entry.d_tag == "DT_RPATH"]
    assert runpath == ["$ORIGIN/../../.."] and rpath == []


def test_wheel_installs_and_runs_in_a_fresh_environment(wheel, tmp_path):
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)])
    work = tmp_path / "work"  # outside the source tree: `import kael` cannot find ROOT/kael
    work.mkdir()
    shutil.copy(ROOT / "tools" / "wheel_smoke.py", work / "smoke.py")
    no_compilers = tmp_path / "bin"  # PATH: the venv's scripts only (no cc, c++, cmake, ninja)
    no_compilers.mkdir()
    env = {"PATH": f"{venv / 'bin'}:{no_compilers}", "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "KAEL_NUM_THREADS": os.environ.get("KAEL_NUM_THREADS", "2")}
    smoke = _run([str(python), "-I", "smoke.py", "--no-compiler"], cwd=work, env=env)
    assert "smoke test passed" in smoke.stdout
    demo = _run([str(python), "-I", "-m", "kael.examples.charlm", "--steps", "20", "--eval-batches", "2",
                 "--sample-length", "40"], cwd=work, env=env)
    assert "trained 20 steps" in demo.stdout, demo.stdout
    assert (work / "charlm.safetensors").stat().st_size > 0
