"""Boolean backend flags held on a module or an object, checked as torch checks them."""
from __future__ import annotations

import types


def check_bool(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise RuntimeError(f"{name} expects a bool, but got {type(value).__name__}")
    return value


def flag_module(module_name: str, flags: dict) -> None:
    """Turns the module into one whose attributes in `flags` (name -> default) accept only
    bools (RuntimeError naming the flag otherwise), as torch's backend modules do."""
    import sys

    module = sys.modules[module_name]

    class FlagModule(types.ModuleType):
        pass

    for name, default in flags.items():
        def getter(self, _name=name):
            return self.__dict__["_flag_values"][_name]

        def setter(self, value, _name=name):
            self.__dict__["_flag_values"][_name] = check_bool(f"{module_name.removeprefix('kael.')}.{_name}", value)

        setattr(FlagModule, name, property(getter, setter))
    module.__dict__["_flag_values"] = dict(flags)
    module.__class__ = FlagModule
