#!/usr/bin/env bash
# Sets up a development environment from a fresh clone: Debian packages (GoogleTest, Open MPI
# for kael.distributed, Chromium for the kael.serve page test through Playwright),
# the virtual environment .venv with every Python dependency, and a developer build of kael
# (pip install -e . --no-build-isolation), which rebuilds incrementally in build/<python-tag>.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

need_apt=()
dpkg -s libgtest-dev >/dev/null 2>&1 || need_apt+=(libgtest-dev)
dpkg -s libopenmpi-dev >/dev/null 2>&1 || need_apt+=(libopenmpi-dev)
command -v mpirun >/dev/null 2>&1 || need_apt+=(openmpi-bin)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
dpkg -s chromium >/dev/null 2>&1 || need_apt+=(chromium)
if [ "${#need_apt[@]}" -gt 0 ]; then
  echo "== installing Debian packages: ${need_apt[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  python3 -m venv .venv
fi
echo "== installing Python packages (requirements-dev.txt)"
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -r requirements-dev.txt

echo "== building kael (developer install)"
export PATH="$PWD/.venv/bin:$PATH"
KAEL_BUILD_TESTS="${KAEL_BUILD_TESTS:-ON}" .venv/bin/python -m pip install -q -e . --no-build-isolation
