"""Every Python package of kael goes into the wheel and the sdist: pyproject.toml has setuptools
find them (`[tool.setuptools.packages.find]`, include kael*), so a package added under kael/ needs
no list to be edited, and here setuptools' finder, run with pyproject.toml's settings, must find
every directory of kael/ that has an __init__.py (a package left out would install without error
and fail at import). test_wheel_install.py checks the same in a wheel it builds."""
import tomllib
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[3]


def packages_on_disk():
    return {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "kael").rglob("__init__.py")
            if "__pycache__" not in p.parts}


def test_every_package_is_found_by_setuptools():
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert find.get("namespaces", True) is False  # a folder without __init__.py is data, not a package
    found = set(find_packages(where=str(ROOT / find.get("where", ["."])[0]), include=find["include"],
                              exclude=find.get("exclude", ())))
    on_disk = packages_on_disk()
    assert on_disk - found == set(), f"packages setuptools would leave out of the wheel: {sorted(on_disk - found)}"
    assert found - on_disk == set(), f"setuptools would ship packages that are not kael's: {sorted(found - on_disk)}"
    assert "kael" in found and len(found) > 10
