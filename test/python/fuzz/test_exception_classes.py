"""The exception classes of the zero-size and bool-bytes sweeps' calls, against torch's: a
ratchet. tools/exception_classes.py counts, where kael and torch both raise, each (kael class,
torch class) pair; the calls where kael raises another class than torch's (and not a subclass
of it: NotImplementedError is a RuntimeError) may only become fewer. docs/decisions/errors.md
says what the remaining ones are."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools"))

import exception_classes  # noqa: E402

# (kael class, torch class) -> calls at most (2026-12-07)
LEFT = {
    ("RuntimeError", "AttributeError"): 184,    # torch's pooling wrappers on bool
    ("RuntimeError", "NotImplementedError"): 7,  # repeat_interleave checks the repeats' rank first
    ("RuntimeError", "IndexError"): 84,         # baddbmm's rank check before torch's dim wrap
    ("IndexError", "RuntimeError"): 26,         # torch fails on a zero-size input first
    ("NotImplementedError", "AttributeError"): 24,
    ("NotImplementedError", "ValueError"): 3,
}


def test_other_exception_classes_than_torchs_only_become_fewer():
    pairs = exception_classes.count()
    assert sum(pairs.values()) > 10000  # the sweeps ran
    other = {(k, t): n for (k, t), n in pairs.items() if k != t and not exception_classes._is_subclass(k, t)}
    grown = {pair: (n, LEFT.get(pair, 0)) for pair, n in other.items() if n > LEFT.get(pair, 0)}
    assert not grown, f"(kael, torch) class pairs with more calls than before (now, before): {grown}"
    fewer = {pair: (other.get(pair, 0), n) for pair, n in LEFT.items() if other.get(pair, 0) < n}
    assert not fewer, f"fewer calls now: lower LEFT to (now, listed): {fewer}"
