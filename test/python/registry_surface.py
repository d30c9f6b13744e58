"""The public names of `kael` and `kael.Tensor` that are not generated from the registry, and where
each comes from. codegen/test_registry_surface.py lists the ones still written in Python (the list must
shrink to the allow-list of conveniences that are not ops); run this file to print the whole
measure:

    python test/python/registry_surface.py
"""
from __future__ import annotations

import inspect
import sys
import types
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import kael  # noqa: E402
from codegen.model import parse_registry  # noqa: E402


def registry_names():
    """(function names, method names) the registry generates; in-place methods included."""
    registry = parse_registry((ROOT / "native_functions.yaml").read_text(), "native_functions.yaml")
    functions, methods = set(), set()
    for f in registry:
        if "function" in f.variants:
            functions.add(f.name)
        if "method" in f.variants:
            methods.add(f.name)
            if f.inplace:
                methods.add(f.name + "_")
    return functions, methods


def _origin(name, value):
    """Where a public callable comes from: 'alias' (a generated binding under another name), the
    module of a Python function (its code's file, so a functools.wraps wrapper counts as Python),
    or 'kael._C' for a hand-written C function or method."""
    # autocast's wrapper of a Python composite (kael/amp/autocast_mode.py) counts as the composite
    unwrap = hasattr(value, "__wrapped__") and (not hasattr(value, "__code__") or hasattr(value, "__kael_autocast__"))
    code = getattr(inspect.unwrap(value) if unwrap else value, "__code__", None)
    if code is None and hasattr(value, "__wrapped__"):
        code = getattr(inspect.unwrap(value), "__code__", None)
    if code is not None:
        path = Path(code.co_filename).resolve()
        try:  # relative to where kael was imported from (the checkout, or an installed copy)
            rel = path.relative_to(Path(kael.__file__).resolve().parents[1])
        except ValueError:
            return str(path)
        return ".".join(rel.with_suffix("").parts)
    own = getattr(value, "__name__", name)
    return "alias" if own != name else "kael._C"


def _wrapped_origin(name, value):
    """A Tensor method added from Python is wrapped for overrides (kael._tensor's
    _overridable_method); its origin is the function it wraps."""
    inner = getattr(value, "__wrapped__", None)
    return _origin(name, inner if inner is not None and hasattr(inner, "__code__") else value)


def non_registry_names():
    """{'kael': {name: origin}, 'Tensor': {name: origin}} for the public callables (not classes,
    modules or properties) that are not generated from the registry under their own name."""
    functions, methods = registry_names()
    module = {}
    for name in dir(kael):
        value = getattr(kael, name)
        if name.startswith("_") or isinstance(value, (type, types.ModuleType)) or not callable(value):
            continue
        if name in functions and value is getattr(kael._C, name, None):
            continue
        module[name] = _origin(name, value)
    tensor = {}
    for name in dir(kael.Tensor):
        if name.startswith("_") or name in methods:
            continue
        static = inspect.getattr_static(kael.Tensor, name)
        if isinstance(static, property) or type(static).__name__ in ("getset_descriptor", "member_descriptor"):
            continue
        tensor[name] = _wrapped_origin(name, getattr(kael.Tensor, name))
    return {"kael": module, "Tensor": tensor}


def python_composites():
    """The names still written in Python over registered ops (kael/_composites.py and
    kael/functional.py): {'kael': set, 'Tensor': set}."""
    where = non_registry_names()
    python = ("kael._composites", "kael.functional")
    return {space: {n for n, o in names.items() if o in python} for space, names in where.items()}


def main():
    where = non_registry_names()
    for space, names in where.items():
        print(f"{space}: {len(names)} public names not generated from the registry")
        for origin, count in Counter(names.values()).most_common():
            print(f"  {count:4d}  {origin}")


if __name__ == "__main__":
    main()
