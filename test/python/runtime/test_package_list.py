"""Every Python package of kael is in pyproject.toml's package list, so `pip install .` and a
wheel carry it (a package left out installs without error and fails at import)."""
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_every_package_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "kael").rglob("__init__.py")}
    assert on_disk - listed == set(), f"packages missing from pyproject.toml: {sorted(on_disk - listed)}"
    assert listed - on_disk == set(), f"pyproject.toml lists packages that do not exist: {sorted(listed - on_disk)}"
