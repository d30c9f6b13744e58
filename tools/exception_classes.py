"""Which registry ops raise another exception class than torch for the same call.

Runs the cases of the zero-size and bool-bytes sweeps (test/python/fuzz) and, for the
calls where kael and torch both raise, counts each (kael class, torch class) pair, by op. The
sweeps themselves accept any exception class when both raise (docs/decisions/errors.md: kael's
shape and value checks raise ValueError where torch raises RuntimeError); this lists where.

    .venv/bin/python tools/exception_classes.py [--ops] [--examples]
        # --ops: every op with a mismatch; --examples: with the two messages of its first call
"""
from __future__ import annotations

import collections
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
TESTS = ROOT / "test" / "python"
sys.path[:0] = [str(TESTS)] + sorted(str(d) for d in TESTS.iterdir() if d.is_dir())  # as test/python/conftest.py

import test_bool_bytes_sweep as bool_sweep  # noqa: E402
import test_zero_size_sweep as zero_sweep  # noqa: E402

PAIRS: collections.Counter = collections.Counter()
BY_OP: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
EXAMPLES: dict = {}  # (op, kael class, torch class) -> (kael message, torch message) of the first call
_current = [""]


def _recording(run_both):
    def run(*args, **kwargs):
        kres, tres = run_both(*args, **kwargs)
        if isinstance(kres, Exception) and isinstance(tres, Exception):
            key = (type(kres).__name__, type(tres).__name__)
            PAIRS[key] += 1
            BY_OP[_current[0]][key] += 1
            EXAMPLES.setdefault((_current[0],) + key, (str(kres)[:150], str(tres)[:150]))
        return kres, tres
    return run


def _is_subclass(kael_class: str, torch_class: str) -> bool:
    """NotImplementedError is a RuntimeError, as in Python."""
    import builtins
    k, t = getattr(builtins, kael_class, None), getattr(builtins, torch_class, None)
    return isinstance(k, type) and isinstance(t, type) and issubclass(k, t)


def count() -> collections.Counter:
    """Runs the sweeps once; returns the (kael class, torch class) pairs of the calls where both
    raised (BY_OP and EXAMPLES hold them by op)."""
    if not PAIRS:
        # both sweeps call test_zero_size_sweep.run_case, which calls its module's run_both
        original = zero_sweep.run_both
        zero_sweep.run_both = _recording(original)
        try:
            sweeps = [(zero_sweep.OPS, zero_sweep._cases), (bool_sweep.SWEPT, bool_sweep._cases)]
            for ops, cases in sweeps:
                for f in ops:
                    _current[0] = f.schema.full_name
                    try:
                        zero_sweep.sweep(f, cases(f), {"computed": 0, "both raised": 0})
                    except AssertionError:
                        pass  # a difference the sweeps themselves report
        finally:
            zero_sweep.run_both = original
    return PAIRS


def main() -> int:
    count()
    same = sum(n for (k, t), n in PAIRS.items() if k == t)
    caught = sum(n for (k, t), n in PAIRS.items() if k != t and _is_subclass(k, t))
    print(f"calls where both raised: {sum(PAIRS.values())}, the same class: {same}, "
          f"a subclass of torch's (an `except` of torch's class catches it): {caught}")
    for (k, t), n in PAIRS.most_common():
        if k != t:
            print(f"  kael {k} where torch {t}: {n} calls, "
                  f"{sum(1 for c in BY_OP.values() if c[(k, t)])} ops")
    if "--ops" in sys.argv or "--examples" in sys.argv:
        for op, counts in sorted(BY_OP.items()):
            differ = {f"{k}/{t}": n for (k, t), n in counts.items() if k != t}
            if differ:
                print(f"{op}: {differ}")
                if "--examples" in sys.argv:
                    for (k, t), n in counts.items():
                        if k != t:
                            km, tm = EXAMPLES[(op, k, t)]
                            print(f"    kael {k}: {km}\n    torch {t}: {tm}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
