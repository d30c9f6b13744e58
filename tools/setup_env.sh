#!/usr/bin/env bash
# Sets up the environment from a fresh clone and builds kael, installing only what is missing
# and printing what it installs (a second run installs nothing and says so).
#
#   bash tools/setup_env.sh --build   what building and running kael need (tools/run_demo.sh):
#                                     a C++ compiler, the virtual environment .venv with
#                                     requirements-build.txt (build tools, numpy, the pinned oneDNN)
#   bash tools/setup_env.sh           everything the tests need too (tools/run_tests.sh): Debian's
#                                     GoogleTest, Open MPI (kael.distributed) and Chromium (the
#                                     kael.serve page test), and requirements-dev.txt (torch, the
#                                     test oracle, pytest and the other oracles, the packaging tools)
#
# Then the developer build: pip install -e . --no-build-isolation the first time, which builds in
# build/<python-tag>; afterwards only the incremental build of that tree (setup.py build_ext
# --inplace), so nothing is reinstalled.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=dev
case "${1:-}" in
  --build) mode=build ;;
  "" | --dev) mode=dev ;;
  *) echo "usage: $0 [--build | --dev]" >&2; exit 2 ;;
esac

need_apt=()
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
if [ "$mode" = dev ]; then
  dpkg -s libgtest-dev >/dev/null 2>&1 || need_apt+=(libgtest-dev)
  dpkg -s libopenmpi-dev >/dev/null 2>&1 || need_apt+=(libopenmpi-dev)
  command -v mpirun >/dev/null 2>&1 || need_apt+=(openmpi-bin)
  dpkg -s chromium >/dev/null 2>&1 || need_apt+=(chromium)
fi
if [ "${#need_apt[@]}" -gt 0 ]; then
  echo "== installing Debian packages: ${need_apt[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
else
  echo "== Debian packages: nothing to install"
fi

if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  python3 -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
requirements=requirements-dev.txt
[ "$mode" = build ] && requirements=requirements-build.txt
mapfile -t missing < <(.venv/bin/python tools/env_check.py missing "$requirements")
if [ "${#missing[@]}" -gt 0 ]; then
  echo "== installing Python packages ($requirements): ${missing[*]}"
  .venv/bin/python -m pip install -q "${missing[@]}"
else
  echo "== Python packages ($requirements): nothing to install"
fi

export PATH="$PWD/.venv/bin:$PATH"
[ "$mode" = dev ] && export KAEL_BUILD_TESTS="${KAEL_BUILD_TESTS:-ON}"
mapfile -t stale < <(.venv/bin/python tools/env_check.py stale)
if [ "${#stale[@]}" -gt 0 ]; then
  echo "== removing the install under kael's former distribution name: ${stale[*]}"
  .venv/bin/python -m pip uninstall -q -y "${stale[@]}"
fi
if .venv/bin/python tools/env_check.py developer "$PWD"; then
  echo "== building kael (incremental; the developer install is in place)"
  .venv/bin/python setup.py -q build_ext --inplace
else
  echo "== installing kael (developer install: pip install -e . --no-build-isolation)"
  .venv/bin/python -m pip install -q -e . --no-build-isolation
fi
