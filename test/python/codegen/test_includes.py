"""The hand-written bindings include only the op headers they use.

Every op has its own generated header (`kael/ops/<name>.h`); `kael/ops.h` includes all of
them and changes whenever an op is added. A file of `csrc/` that included it would recompile
on every new op, so the bindings include the headers of the ops they call, and only those
(not through another header).
"""
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from codegen.model import parse_registry  # noqa: E402

OP_NAMES = {f.name for f in parse_registry((ROOT / "native_functions.yaml").read_text())}
CSRC = sorted(p for p in (ROOT / "csrc").rglob("*") if p.suffix in (".cpp", ".h"))
INCLUDE = re.compile(r'^\s*#\s*include\s+"kael/ops(?:\.h|/(\w+)\.h)"', re.M)


def _code(text):
    """The text without comments and string literals."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


def _called_ops(text):
    """Registry ops the file calls as kael::<op>, kael::<op>_ or kael::<op>_out."""
    return set().union(*_called_alternatives(text)) if _called_alternatives(text) else set()


def _called_alternatives(text):
    """For each kael::<name>( call, the registry ops whose header may declare it: kael::div_ is
    the derived in-place form of pointwise div (kael/ops/div.h) or a hand-written entry named
    div_ (kael/ops/div_.h), so either header serves."""
    calls = []
    for name in re.findall(r"\bkael::(\w+)\s*\(", _code(text)):
        options = {c for c in (name, name[:-1] if name.endswith("_") else None,
                               name[:-4] if name.endswith("_out") else None) if c in OP_NAMES}
        if options:
            calls.append(frozenset(options))
    return calls


def test_the_checker_sees_calls_and_includes():
    text = '#include "kael/ops/add.h"\n// kael::mul(a, b) in a comment\nx = kael::add_(a, b); kael::exp_out(o, a);'
    assert _called_ops(text) == {"add", "exp"}
    assert [m.group(1) for m in INCLUDE.finditer(text)] == ["add"]
    assert [m.group(1) for m in INCLUDE.finditer('#include "kael/ops.h"')] == [None]


@pytest.mark.parametrize("path", CSRC, ids=lambda p: str(p.relative_to(ROOT / "csrc")))
def test_csrc_includes_only_the_op_headers_it_uses(path):
    text = path.read_text()
    included = [m.group(1) for m in INCLUDE.finditer(text)]
    assert None not in included, (f"{path.name} includes the umbrella kael/ops.h: include the "
                                  "kael/ops/<name>.h of each op it calls instead")
    unknown = sorted(set(included) - OP_NAMES)
    assert not unknown, f"{path.name} includes headers of ops the registry lacks: {unknown}"
    calls = _called_alternatives(text)
    unused = sorted(set(included) - set().union(*calls)) if calls else sorted(included)
    assert not unused, f"{path.name} includes op headers it does not use: {unused}"
    missing = sorted(min(options) for options in calls if not options & set(included))
    assert not missing, f"{path.name} calls ops whose headers it does not include: {missing}"
