#!/usr/bin/env bash
# Builds the core and the GoogleTest suite with AddressSanitizer + UndefinedBehaviorSanitizer
# in build/asan and runs it. Assumes tools/setup_env.sh has run (it needs .venv and GoogleTest).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PWD/.venv/bin:$PATH"
dnnl_dir="$PWD/.venv/lib/cmake/dnnl"  # from onednn-devel-cpu-gomp (requirements-dev.txt)
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKAEL_SANITIZE=ON \
  -DKAEL_BUILD_PYTHON=OFF -DKAEL_BUILD_TESTS=ON -DPython3_EXECUTABLE="$PWD/.venv/bin/python" -Ddnnl_DIR="$dnnl_dir"
cmake --build build/asan --target kael_cpp_tests -j "$(nproc)"
# oneDNN's JIT code and OpenMP runtime are not instrumented; leaks inside them are not ours.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
(cd build/asan && ctest --output-on-failure --timeout 600)
