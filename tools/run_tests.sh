#!/usr/bin/env bash
# Quick start and CI (.ci/run): set up everything the tests need (tools/setup_env.sh: the test
# oracle, GoogleTest, Open MPI, Chromium), build, then run the whole test suite (pytest + GoogleTest via ctest).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/setup_env.sh
build_dir=$(.venv/bin/python -c 'import sys, sysconfig; print(f"build/{sys.implementation.cache_tag}-{sysconfig.get_platform()}")')

echo "== pytest"
.venv/bin/python -m pytest test/python -q -p no:cacheprovider

echo "== GoogleTest (ctest)"
export PATH="$PWD/.venv/bin:$PATH"
cmake --build "$build_dir" --target kael_cpp_tests -j "$(nproc)"
(cd "$build_dir" && ctest --output-on-failure --timeout 300)
