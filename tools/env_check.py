"""What tools/setup_env.sh still has to install, so that a second run installs nothing.

  python tools/env_check.py missing FILE    the requirements of FILE (and of the files it
                                            includes with -r) that this environment does not satisfy
  python tools/env_check.py developer ROOT  exit status 0 when kael-tensor is installed from ROOT
                                            as a developer (editable) install, else 1
  python tools/env_check.py stale           the distributions of older names that a developer
                                            install replaces (the package was once named kael)

Runs with the environment's own Python, needing nothing beyond pip (its vendored packaging).
"""
from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path

try:
    from packaging.requirements import Requirement
except ImportError:  # a fresh venv has pip's copy only
    from pip._vendor.packaging.requirements import Requirement


def requirement_lines(path: Path):
    for raw in path.read_text().splitlines():
        line = raw.split(" #")[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-r "):
            yield from requirement_lines(path.parent / line[3:].strip())
        else:
            yield line


def missing(path: Path) -> list[str]:
    out = []
    for line in requirement_lines(path):
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            installed = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            out.append(line)
            continue
        if req.specifier and not req.specifier.contains(installed, prereleases=True):
            out.append(line)
    return out


def developer_install(root: Path) -> bool:
    try:
        dist = metadata.distribution("kael-tensor")
    except metadata.PackageNotFoundError:
        return False
    direct = dist.read_text("direct_url.json")
    if not direct:
        return False
    info = json.loads(direct)
    return bool(info.get("dir_info", {}).get("editable")) and \
        info.get("url", "").removeprefix("file://") == str(root.resolve())


def main(argv: list[str]) -> int:
    if argv[:1] == ["missing"] and len(argv) == 2:
        for line in missing(Path(argv[1])):
            print(line)
        return 0
    if argv[:1] == ["developer"] and len(argv) == 2:
        return 0 if developer_install(Path(argv[1])) else 1
    if argv == ["stale"]:
        stale = []
        for name in ("kael",):
            try:
                metadata.distribution(name)
                stale.append(name)
            except metadata.PackageNotFoundError:
                pass
        for name in stale:
            print(name)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
