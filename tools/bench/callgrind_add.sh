#!/usr/bin/env bash
# Instructions executed per `a + b` on 1-element float32 tensors, measured
# with callgrind for kael, torch and numpy.
#
#   tools/bench/callgrind_add.sh                 # all of kael torch numpy (+ empty loop)
#   tools/bench/callgrind_add.sh numpy torch     # a subset
#   PYTHON=/path/to/python N=20000 OUTDIR=/tmp/cg tools/bench/callgrind_add.sh kael
#
# For each library it runs tools/bench/tiny_add_loop.py under
# `valgrind --tool=callgrind` with N=0 and N=$N (default 10000); the import
# and setup cost is identical in both, so
#     Ir per a + b = (Ir(N) - Ir(0)) / N
# (includes the Python loop, ~tens of instructions; see the `none` row).
# torch under valgrind is slow (its import takes a minute or two).
# Note: valgrind does not emulate AVX-512, so libraries with runtime CPU
# dispatch take their AVX2 paths here; this matters little for 1 element.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
PYTHON="${PYTHON:-.venv/bin/python}"
case "$PYTHON" in /*) ;; */*) PYTHON="$root/$PYTHON" ;; esac
N="${N:-10000}"
OUTDIR="${OUTDIR:-${TMPDIR:-/tmp}/kael-callgrind}"
if [ "$#" -gt 0 ]; then libs=("$@"); else libs=(kael torch numpy none); fi

command -v valgrind >/dev/null || { echo "valgrind not found (apt-get install valgrind)" >&2; exit 1; }
mkdir -p "$OUTDIR"

# Deterministic runs: fixed hash seed, one thread everywhere.
export PYTHONHASHSEED=0 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

total_ir() {  # total Ir of a callgrind output file ("summary:" or "totals:" line)
    awk '/^(summary|totals):/ { print $2; exit }' "$1"
}

run_one() {  # lib n -> Ir on stdout
    local lib="$1" n="$2" out="$OUTDIR/callgrind.$1.$2.out"
    if ! valgrind --tool=callgrind --callgrind-out-file="$out" --dump-instr=no \
            "$PYTHON" "$here/tiny_add_loop.py" "$lib" "$n" >"$OUTDIR/$lib.$n.log" 2>&1; then
        echo "  $lib N=$n failed, see $OUTDIR/$lib.$n.log:" >&2
        grep -v '^==' "$OUTDIR/$lib.$n.log" | tail -3 | sed 's/^/    /' >&2
        return 1
    fi
    total_ir "$out"
}

echo "callgrind: Ir per \`a + b\` (1-element float32), N=$N, python=$PYTHON"
printf '%-8s %16s %16s %12s\n' lib "Ir(N=0)" "Ir(N=$N)" "Ir per op"
status=0
for lib in "${libs[@]}"; do
    start=$SECONDS
    if ir0=$(run_one "$lib" 0) && ir1=$(run_one "$lib" "$N"); then
        per=$(awk -v a="$ir0" -v b="$ir1" -v n="$N" 'BEGIN { printf "%.1f", (b - a) / n }')
        printf '%-8s %16s %16s %12s   (%ds)\n' "$lib" "$ir0" "$ir1" "$per" $((SECONDS - start))
    else
        printf '%-8s %16s %16s %12s\n' "$lib" - - "n/a"
        status=1
    fi
done
case " ${libs[*]} " in
    *" none "*) echo "(the 'none' row is the bare Python loop, already included in the other rows)" ;;
esac
echo "output files: $OUTDIR/callgrind.<lib>.<N>.out  (inspect with callgrind_annotate)"
exit $status
