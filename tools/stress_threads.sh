#!/usr/bin/env bash
# Long run of the concurrency stress test (test/python/runtime/test_concurrency.py): 8 threads mixing
# ops on shared and private tensors, resizes through out=, empty_cache(), weak references and
# gc.collect(), for the given number of seconds (default 600), in a subprocess.
#   bash tools/stress_threads.sh [seconds]
# Under ASan or TSan: build with tools/run_sanitizers.sh first, then run this with the
# instrumented package on PYTHONPATH and the runtime in LD_PRELOAD, as that script does.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export KAEL_STRESS_SECONDS="${1:-600}"
exec .venv/bin/python -m pytest test/python/runtime/test_concurrency.py -q -p no:cacheprovider -k stress
