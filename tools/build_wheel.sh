#!/usr/bin/env bash
# Builds a manylinux wheel of kael (distribution kael-tensor) for this machine's platform into
# dist/ (or $KAEL_WHEEL_DIR): `pip wheel . --no-deps`, then `auditwheel repair`.
#
# oneDNN is not vendored: libdnnl.so.3 comes from the pinned onednn-cpu-gomp wheel, a dependency
# of kael-tensor, and libgomp.so.1 is the one libdnnl itself loads (the system's GCC runtime), so
# both are excluded from the repair and the extension finds them where they are installed
# (docs/decisions/wheel.md). libmpi is excluded too: a wheel from a build with MPI
# (kael.distributed) uses the system's Open MPI; release wheels are built without it.
#
#   bash tools/build_wheel.sh                 # a clean build in pip's isolated environment (minutes)
#   KAEL_BUILD_DIR=build/cpython-311-linux-x86_64 bash tools/build_wheel.sh
#                                             # from the developer build, incrementally (seconds)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python=${PYTHON:-.venv/bin/python}
out=${KAEL_WHEEL_DIR:-dist}
raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT

isolation=()
if [ -n "${KAEL_BUILD_DIR:-}" ]; then
  # The developer build was configured by this environment's cmake, ninja and oneDNN: build with them.
  isolation=(--no-build-isolation)
  export PATH="$(dirname "$python"):$PATH"
fi
# setuptools stages a wheel's files in build/lib.* and build/bdist.*; a module deleted since an
# earlier build would still be there and ride along.
rm -rf build/lib.* build/bdist.*
echo "== pip wheel . ${isolation[*]}"
"$python" -m pip wheel . -w "$raw" --no-deps "${isolation[@]}"
wheel=$(ls "$raw"/kael_tensor-*.whl)
echo "== auditwheel repair $(basename "$wheel")"
mkdir -p "$out"
"$python" -m auditwheel repair "$wheel" -w "$out" \
  --exclude 'libdnnl.so.*' --exclude 'libgomp.so.*' --exclude 'libmpi.so.*'
