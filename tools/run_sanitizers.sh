#!/usr/bin/env bash
# ASan + UBSan: builds the core, the GoogleTest suite and kael._C with both sanitizers in
# build/asan, runs the GoogleTest suite, then the pytest suite against the instrumented
# extension (the sanitizer runtimes preloaded into Python). Assumes tools/setup_env.sh has run.
#   bash tools/run_sanitizers.sh                     # both suites (the pytest suite includes the
#                                                    # short fuzz run, test/python/fuzz/test_fuzz.py)
#   bash tools/run_sanitizers.sh --cpp               # GoogleTest only
#   bash tools/run_sanitizers.sh --fuzz-long [CASES] # both suites, then the long fuzz run
#                                                    # (tools/fuzz_long.py, CASES cases, default 100,000)
#   bash tools/run_sanitizers.sh --fuzz-only [CASES] # the long fuzz run only
#   bash tools/run_sanitizers.sh --tsan              # ThreadSanitizer: the concurrency and thread tests (below)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PWD/.venv/bin:$PATH"
dnnl_dir="$PWD/.venv/lib/cmake/dnnl"  # from onednn-devel-cpu-gomp (requirements-dev.txt)

if [ "${1:-}" = "--tsan" ]; then
  # ThreadSanitizer: core, GoogleTest and kael._C built with -fsanitize=thread in build/tsan;
  # runs the GoogleTest thread tests (the thread pool's included), then test_concurrency.py and
  # test_threads.py with libtsan preloaded into Python. kael's loops run on kael's own thread
  # pool with 2 threads (KAEL_NUM_THREADS=2 below): its std::threads, mutexes and condition
  # variables are pthreads, which TSan sees, so the pool and the loops it runs are checked.
  # oneDNN's matmul runs on GNU OpenMP with the same count; libgomp is not instrumented and
  # synchronises its team through futexes TSan cannot see: reports with a libgomp team thread on
  # one side are suppressed (tools/tsan.supp says why). die_after_fork=0: the fork tests start the
  # pool's threads again in a child forked from a process with threads, which TSan refuses by
  # default. The stress test runs race-free (KAEL_STRESS_RACE_FREE=1: no element is read by one
  # thread while another writes it), so that any report is a race in kael, not one the test
  # makes on purpose.
  cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKAEL_TSAN=ON -DKAEL_PCH=OFF \
    -DKAEL_BUILD_PYTHON=ON -DKAEL_BUILD_TESTS=ON -DPython3_EXECUTABLE="$PWD/.venv/bin/python" -Ddnnl_DIR="$dnnl_dir"
  cmake --build build/tsan --target kael_cpp_tests _C -j "${KAEL_JOBS:-$(nproc)}"
  # suppress_equal_addresses=0: TSan's default keeps every address it reported (suppressed
  # reports included) in one list it scans, under a global lock, for each new report. A parallel
  # loop whose buffer an earlier team of another thread wrote (kael's allocator hands the block
  # on) has one suppressed libgomp report per element, so the scan made test_threads.py's loop
  # quadratic in the buffer size (2^20 elements: past 600 s; with this option 2 s). With
  # halt_on_error=1 the first unsuppressed report ends the run, so no report is lost.
  export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:history_size=7:second_deadlock_stack=1:report_signal_unsafe=0:die_after_fork=0:suppress_equal_addresses=0:suppressions=$PWD/tools/tsan.supp}"
  export KAEL_NUM_THREADS=2 KAEL_STRESS_RACE_FREE=1 KAEL_TEST_TIMEOUT_FACTOR=5
  # setarch -R: TSan's shadow memory needs the address layout of a non-randomised process.
  setarch "$(uname -m)" -R build/tsan/kael_cpp_tests \
    --gtest_filter='Concurrency.*:Allocator.*Thread*:SelectKey.*Thread*:ThreadPool.*:RunLoop.*'
  pkg=build/tsan/python-package
  rm -rf "$pkg" && mkdir -p "$pkg/kael"
  tar -C kael --exclude='_C*.so' --exclude=__pycache__ -cf - . | tar -C "$pkg/kael" -xf -  # all but the plain _C
  cp build/tsan/_C*.so build/tsan/_C.pyi "$pkg/kael/"
  root="$PWD"
  cd "$pkg"
  export LD_PRELOAD="$(g++ -print-file-name=libtsan.so)" PYTHONPATH="$PWD"
  setarch "$(uname -m)" -R "$root/.venv/bin/python" -c \
    "import kael._C, sys; assert kael._C.__file__.startswith('$PWD'), kael._C.__file__"
  # --capture=sys, as in the ASan steps below: a report written to file descriptor 2 reaches the
  # terminal instead of pytest's capture of it.
  setarch "$(uname -m)" -R "$root/.venv/bin/python" -m pytest "$root/test/python/runtime/test_concurrency.py" \
    "$root/test/python/runtime/test_threads.py" -q --capture=sys -p no:cacheprovider --rootdir "$root"
  # The thread tests of the other files: backward on two threads and with the GIL released, the
  # tokenizer's encode_batch and encodes from several Python threads, safetensors loads without
  # the GIL, owners released from other threads, and the kernels checked on 1 and 2 threads.
  thread_files=()
  for f in autograd/autograd text/bpe_tokenizer interop/safetensors interop/storage tensor/behaviour \
           tensor/object_protocols ops/attention ops/attention_dropout nn/nn_ops ops/random ops/reductions \
           ops/reductions_more ops/sort_scan ops/values_indices ops/scatter_reduce interop/interop; do
    thread_files+=("$root/test/python/${f%/*}/test_${f#*/}.py")
  done
  setarch "$(uname -m)" -R "$root/.venv/bin/python" -m pytest "${thread_files[@]}" -q --capture=sys -p no:cacheprovider \
    --rootdir "$root" -k "thread or gil or concurren"
  exit 0
fi
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKAEL_SANITIZE=ON -DKAEL_PCH=OFF \
  -DKAEL_BUILD_PYTHON=ON -DKAEL_BUILD_TESTS=ON -DPython3_EXECUTABLE="$PWD/.venv/bin/python" -Ddnnl_DIR="$dnnl_dir"
cmake --build build/asan --target kael_cpp_tests _C -j "$(nproc)"

# oneDNN's JIT code and the OpenMP runtime are not instrumented; leak checks would report
# their start-up allocations. Huge requests must fail as MemoryError, not abort.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# Python's own allocator hides a use of memory it freed from ASan (pymalloc reuses the block):
# with plain malloc, a list item read after the list was cleared is reported.
export PYTHONMALLOC=malloc
mode="${1:-}"
cases="${2:-100000}"
if [ "$mode" != "--fuzz-only" ]; then
  (cd build/asan && ctest --output-on-failure --timeout 600)
fi
[ "$mode" = "--cpp" ] && exit 0

pkg=build/asan/python-package
rm -rf "$pkg" && mkdir -p "$pkg/kael"
tar -C kael --exclude='_C*.so' --exclude=__pycache__ -cf - . | tar -C "$pkg/kael" -xf -  # all but the plain _C
cp build/asan/_C*.so build/asan/_C.pyi "$pkg/kael/"
root="$PWD"
cd "$pkg"  # so that `import kael` finds the instrumented package, not the checkout's
export LD_PRELOAD="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libubsan.so)" PYTHONPATH="$PWD"
"$root/.venv/bin/python" -c "import kael._C, sys; assert kael._C.__file__.startswith('$PWD'), kael._C.__file__"
if [ "$mode" != "--fuzz-only" ]; then
  # kael is imported before the first test module: several put the checkout on sys.path[0], and an
  # `import kael` after that would load the checkout's own, uninstrumented _C without a word.
  # --capture=sys: a sanitizer writes its report to file descriptor 2, which pytest's default
  # capture swallows with the process (the run would end with no report and no summary).
  "$root/.venv/bin/python" -c "import sys, kael, pytest
assert kael._C.__file__.startswith('$PWD'), kael._C.__file__
sys.exit(pytest.main(sys.argv[1:]))" "$root/test/python" -q --capture=sys -p no:cacheprovider --rootdir "$root"
fi
if [ "$mode" = "--fuzz-long" ] || [ "$mode" = "--fuzz-only" ]; then
  # one child pytest per core, each a share of the properties (KAEL_FUZZ_JOBS to choose)
  "$root/.venv/bin/python" "$root/tools/fuzz_long.py" --cases "$cases" --python "$root/.venv/bin/python" \
    --jobs "${KAEL_FUZZ_JOBS:-$(nproc)}"
fi
