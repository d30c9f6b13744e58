#!/usr/bin/env bash
# ASan + UBSan: builds the core, the GoogleTest suite and kael._C with both sanitizers in
# build/asan, runs the GoogleTest suite, then the pytest suite against the instrumented
# extension (the sanitizer runtimes preloaded into Python). Assumes tools/setup_env.sh has run.
#   bash tools/run_sanitizers.sh                     # both suites (the pytest suite includes the
#                                                    # short fuzz run, test/python/test_fuzz.py)
#   bash tools/run_sanitizers.sh --cpp               # GoogleTest only
#   bash tools/run_sanitizers.sh --fuzz-long [CASES] # both suites, then the long fuzz run
#                                                    # (tools/fuzz_long.py, CASES cases, default 100,000)
#   bash tools/run_sanitizers.sh --fuzz-only [CASES] # the long fuzz run only
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PWD/.venv/bin:$PATH"
dnnl_dir="$PWD/.venv/lib/cmake/dnnl"  # from onednn-devel-cpu-gomp (requirements-dev.txt)
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKAEL_SANITIZE=ON \
  -DKAEL_BUILD_PYTHON=ON -DKAEL_BUILD_TESTS=ON -DPython3_EXECUTABLE="$PWD/.venv/bin/python" -Ddnnl_DIR="$dnnl_dir"
cmake --build build/asan --target kael_cpp_tests _C -j "$(nproc)"

# oneDNN's JIT code and the OpenMP runtime are not instrumented; leak checks would report
# their start-up allocations. Huge requests must fail as MemoryError, not abort.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
mode="${1:-}"
cases="${2:-100000}"
if [ "$mode" != "--fuzz-only" ]; then
  (cd build/asan && ctest --output-on-failure --timeout 600)
fi
[ "$mode" = "--cpp" ] && exit 0

pkg=build/asan/python-package
rm -rf "$pkg" && mkdir -p "$pkg/kael"
cp -r kael/*.py kael/utils "$pkg/kael/"
cp build/asan/_C*.so build/asan/_C.pyi "$pkg/kael/"
root="$PWD"
cd "$pkg"  # so that `import kael` finds the instrumented package, not the checkout's
export LD_PRELOAD="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libubsan.so)" PYTHONPATH="$PWD"
"$root/.venv/bin/python" -c "import kael._C, sys; assert kael._C.__file__.startswith('$PWD'), kael._C.__file__"
if [ "$mode" != "--fuzz-only" ]; then
  "$root/.venv/bin/python" -m pytest "$root/test/python" -q -p no:cacheprovider --rootdir "$root"
fi
if [ "$mode" = "--fuzz-long" ] || [ "$mode" = "--fuzz-only" ]; then
  "$root/.venv/bin/python" "$root/tools/fuzz_long.py" --cases "$cases" --python "$root/.venv/bin/python"
fi
