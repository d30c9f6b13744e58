"""Adding an op or editing a formula recompiles only the files that must change.

The developer loop is: edit native_functions.yaml, rebuild. Codegen rewrites only the generated
files whose content changed, and the build recompiles the translation units that see one of
them. This test computes that set without compiling: it runs codegen into two temporary
directories, before and after an edit, takes the generated files whose content differs, and
follows the #include lines of every translation unit of kael._C (hand-written and generated,
honouring #ifdef/#ifndef on macros the unit defines; any other #if counts as taken) to the units
that see a changed file. Those are the objects Ninja recompiles (then it archives and links).

What one added op may recompile: its own kernel, the API, Python, graph-node and formulas shards
that hold it, and the op list, whichever shard it lands in. A derivative formula edit recompiles
its op's formulas shard only; a pointwise formula edit, that op's kernel only. See docs/build.md
("How a one-entry edit stays cheap").
"""
from __future__ import annotations

import re
import sys
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from codegen import gen  # noqa: E402

REGISTRY = (ROOT / "native_functions.yaml").read_text()

NEW_OP = """
- func: rebuild_probe_square(Tensor self) -> Tensor
  variants: [function, method]
  pointwise: a * a
  dtypes: [float32, float64]
  derivatives:
    self: 2 * grad * self
  doc: Squares each element (the rebuild-scope test's op).
"""

_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)\s*(.*?)\s*$")
_QUOTED = re.compile(r'"([^"]+)"')


@lru_cache(maxsize=None)
def _directives(path: Path) -> tuple[tuple[str, str], ...]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        m = _DIRECTIVE.match(line)
        if m:
            out.append((m.group(1), m.group(2)))
    return tuple(out)


class Tree:
    """The translation units of kael._C in a source tree plus one codegen output directory."""

    def __init__(self, generated: Path):
        self.generated = generated
        self.include_dirs = [ROOT / "aten/include", generated / "include", ROOT / "csrc",
                             *sorted(p for p in (ROOT / "libs").glob("*/include") if p.is_dir())]
        sources = gen_sources(generated)
        self.units = sorted(
            [*(ROOT / "aten/src").rglob("*.cpp"), *(ROOT / "csrc").glob("*.cpp"), *(ROOT / "csrc/libs").glob("*.cpp"),
             *(p for lib in sorted((ROOT / "libs").iterdir()) if (lib / "src").is_dir()
               for p in (lib / "src").rglob("*.cpp")),
             *sources])

    def resolve(self, name: str, includer: Path) -> Path | None:
        for base in (includer.parent, *self.include_dirs):
            candidate = base / name
            if candidate.is_file():
                return candidate
        return None  # a system header, or one of the configure step's (kael_build_config.h)

    def closure(self, unit: Path) -> set[Path]:
        """Every file of ours the unit reads, the unit included."""
        seen: set[Path] = set()
        defines: set[str] = set()

        def visit(path: Path) -> None:
            seen.add(path)
            # one entry per open conditional: (this branch taken, a branch was known-taken, known)
            stack: list[tuple[bool, bool, bool]] = []
            for kind, rest in _directives(path):
                if kind in ("ifdef", "ifndef"):
                    macro = rest.split()[0] if rest else ""
                    taken = (macro in defines) == (kind == "ifdef")
                    stack.append((taken, taken, True))
                    continue
                if kind == "if":
                    stack.append((True, False, False))
                    continue
                if kind in ("elif", "else") and stack:
                    taken, done, known = stack[-1]
                    stack[-1] = (not done, done, known) if known and kind == "else" else (True, done, False)
                    continue
                if kind == "endif":
                    if stack:
                        stack.pop()
                    continue
                if not all(t for t, _, _ in stack):
                    continue
                if kind == "define" and rest:
                    defines.add(re.split(r"[\s(]", rest, maxsplit=1)[0])
                elif kind == "undef" and rest:
                    defines.discard(rest.split()[0])
                elif kind == "include":
                    m = _QUOTED.match(rest)
                    if m:
                        target = self.resolve(m.group(1), path)
                        if target is not None and target not in seen:
                            visit(target)

        visit(unit)
        return seen


def gen_sources(generated: Path) -> list[Path]:
    """The generated translation units CMake compiles (sources.cmake's aten and Python lists)."""
    text = (generated / "sources.cmake").read_text()
    out = []
    for block in re.findall(r"set\((KAEL_GENERATED_(?:ATEN|PYTHON)_SOURCES)(.*?)\)", text, re.S):
        out += [Path(p) for p in re.findall(r'"([^"]+)"', block[1])]
    assert out, "sources.cmake lists no generated sources: update gen_sources()"
    return out


def _generate(tmp: Path, registry: str) -> dict[str, str]:
    """Runs codegen on `registry` into tmp/generated (as the build does: the same directory each
    time, files rewritten only when their content changes); returns every file's content."""
    yaml = tmp / "native_functions.yaml"
    yaml.write_text(registry)
    out = tmp / "generated"
    gen.generate(yaml, out)
    return {p.relative_to(out).as_posix(): p.read_text() for p in out.rglob("*")
            if p.is_file() and not p.relative_to(out).as_posix().startswith(".jinja-cache/")}


def recompiled(tmp: Path, edited: str) -> tuple[set[str], set[str]]:
    """(generated files whose content the edit changed, units that see one of them), as paths
    relative to the generated directory or the source tree."""
    before = _generate(tmp, REGISTRY)
    after = _generate(tmp, edited)
    out = tmp / "generated"
    changed = {name for name in after if before.get(name) != after[name]}
    changed |= set(before) - set(after)
    changed_paths = {out / name for name in changed}
    tree = Tree(out)
    units = set()
    for unit in tree.units:
        if tree.closure(unit) & changed_paths:
            units.add(unit.relative_to(out).as_posix() if unit.is_relative_to(out)
                      else unit.relative_to(ROOT).as_posix())
    return changed, units


def _insert_before(registry: str, func_prefix: str, entry: str) -> str:
    at = registry.index(f"\n- func: {func_prefix}")
    return registry[:at] + "\n" + entry.strip("\n") + "\n" + registry[at:]


def _replace_once(registry: str, old: str, new: str) -> str:
    assert registry.count(old) == 1, f"{old!r} is not in the registry exactly once: update this test"
    return registry.replace(old, new)


def test_codegen_output_is_deterministic(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = _generate(tmp_path / "a", REGISTRY)
    second = _generate(tmp_path / "b", REGISTRY)
    strip = lambda files: {k: v.replace(str(tmp_path / "a"), "").replace(str(tmp_path / "b"), "")  # noqa: E731
                           for k, v in files.items()}
    assert strip(first) == strip(second)
    assert _generate(tmp_path / "a", REGISTRY) == first


@pytest.mark.parametrize("where", ["end", "middle"])
def test_adding_a_pointwise_op_recompiles_only_its_own_files(tmp_path, where):
    edited = REGISTRY + NEW_OP if where == "end" else _insert_before(REGISTRY, "reciprocal(", NEW_OP)
    changed, units = recompiled(tmp_path, edited)
    k = gen.shard_of("rebuild_probe_square")
    expected = {
        "src/pointwise/rebuild_probe_square.cpp",  # its kernel
        f"src/ops_{k}.cpp",                        # its C++ API and operator entries
        f"python/functions_{k}.cpp",               # its Python parsers
        f"src/autograd/functions_{k}.cpp",         # its graph node and Autograd kernels
        "src/all_ops.cpp",                         # the list of every operator
        f"src/autograd/formulas_{k}.cpp",          # its derivative formula
    }
    assert units <= expected, (f"adding one op recompiles {sorted(units - expected)} as well; "
                               f"generated files it changed: {sorted(changed)}")
    others = {f"src/{kind}_{i}.cpp" for i in range(gen.NUM_SHARDS) if i != k
              for kind in ("ops", "autograd/functions", "autograd/formulas")}
    assert not units & others
    assert "src/pointwise/rebuild_probe_square.cpp" in units  # the check sees the edit at all


def test_editing_a_derivative_formula_recompiles_only_its_formulas_shard(tmp_path):
    edited = _replace_once(REGISTRY, "    self: -grad * result * result\n  doc: Returns 1 / x for each element.",
                           "    self: -(grad * result) * result\n  doc: Returns 1 / x for each element.")
    changed, units = recompiled(tmp_path, edited)
    assert units == {f"src/autograd/formulas_{gen.shard_of('reciprocal')}.cpp"}, \
        f"generated files the edit changed: {sorted(changed)}"


def test_a_formula_naming_a_new_op_recompiles_the_formulas_shards(tmp_path):
    """The other side of the vocabulary (Note [Formula vocabulary]): a formula that calls an op no
    formula called before adds it to kael::Var, so every formulas shard sees the change."""
    edited = _replace_once(REGISTRY, "    self: -grad * result * result\n  doc: Returns 1 / x for each element.",
                           "    self: -grad * result.square()\n  doc: Returns 1 / x for each element.")
    assert "square" not in gen.formula_vocabulary(gen.parse_registry(REGISTRY)), \
        "a formula already calls square: pick an op no formula calls"
    changed, units = recompiled(tmp_path, edited)
    assert "include/kael/var.h" in changed
    assert {f"src/autograd/formulas_{i}.cpp" for i in range(gen.NUM_SHARDS)} <= units


def test_editing_a_pointwise_formula_recompiles_only_that_kernel(tmp_path):
    edited = _replace_once(REGISTRY, "  pointwise: T(1) / a\n", "  pointwise: T(1) / (a)\n")
    changed, units = recompiled(tmp_path, edited)
    assert units == {"src/pointwise/reciprocal.cpp"}, f"generated files the edit changed: {sorted(changed)}"


def test_the_include_walk_honours_the_units_own_macros(tmp_path):
    (tmp_path / "include").mkdir()
    (tmp_path / "include/a.h").write_text('#pragma once\n#ifdef WANT_B\n#include "b.h"\n#endif\n#include "c.h"\n')
    (tmp_path / "include/b.h").write_text("#pragma once\n")
    (tmp_path / "include/c.h").write_text("#pragma once\n#if defined(X)\n#else\n#endif\n")
    with_b = tmp_path / "with_b.cpp"
    with_b.write_text('#define WANT_B\n#include "include/a.h"\n')
    without_b = tmp_path / "without_b.cpp"
    without_b.write_text('#include "include/a.h"\n')
    tree = Tree.__new__(Tree)
    tree.include_dirs = []
    names = lambda unit: {p.relative_to(tmp_path).as_posix() for p in tree.closure(unit)}  # noqa: E731
    assert names(with_b) == {"with_b.cpp", "include/a.h", "include/b.h", "include/c.h"}
    assert names(without_b) == {"without_b.cpp", "include/a.h", "include/c.h"}
