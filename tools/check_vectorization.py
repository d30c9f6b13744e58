"""Recompiles one generated pointwise kernel with GCC's vectorizer report and prints what it
says about the loops of kael/native/loops.h (see Note [Loop geometry]).

    .venv/bin/python tools/check_vectorization.py [op] [build_dir]

The contiguous inner loops should read "loop vectorized using 32 byte vectors" (AVX2).
"""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    op = sys.argv[1] if len(sys.argv) > 1 else "add"
    default = ROOT / "build" / f"{sys.implementation.cache_tag}-{sysconfig.get_platform()}"
    build = Path(sys.argv[2]) if len(sys.argv) > 2 else default
    entries = json.loads((build / "compile_commands.json").read_text())
    entry = next((e for e in entries if e["file"].endswith(f"pointwise/{op}.cpp")), None)
    if entry is None:
        print(f"no generated kernel for '{op}' in {build}", file=sys.stderr)
        return 1
    args = shlex.split(entry["command"])
    with tempfile.TemporaryDirectory() as tmp:
        args[args.index("-o") + 1] = str(Path(tmp) / "kernel.o")
        args.insert(1, "-fopt-info-vec-optimized")
        result = subprocess.run(args, cwd=entry["directory"], capture_output=True, text=True)
    if result.returncode != 0:
        print(result.stderr, file=sys.stderr)
        return result.returncode
    lines = sorted({line.split("optimized: ", 1)[1] for line in result.stderr.splitlines()
                    if "native/loops.h" in line and "optimized: " in line})
    print(f"{op}: {len(lines)} distinct vectorizer reports for kael/native/loops.h")
    for line in lines:
        print("  " + line.strip())
    return 0 if any("32 byte vectors" in line or "64 byte vectors" in line for line in lines) else 2


if __name__ == "__main__":
    sys.exit(main())
