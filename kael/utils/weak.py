"""Weak-keyed containers keyed by tensor identity.

``weakref.WeakKeyDictionary`` looks keys up with ``==``, which for tensors is elementwise
(so its truth value is ambiguous), exactly as in PyTorch. ``WeakIdKeyDictionary`` keys by
identity instead, the way tensors hash.

>>> import kael
>>> from kael.utils.weak import WeakIdKeyDictionary
>>> cache = WeakIdKeyDictionary()
>>> t = kael.ones(3)
>>> cache[t] = "stats"
>>> cache[t]
'stats'
"""
from __future__ import annotations

import weakref
from collections.abc import Iterator, MutableMapping
from typing import Any


class WeakIdKeyDictionary(MutableMapping):
    """A mapping from objects (held weakly) to values, compared by identity."""

    def __init__(self, items: Any = None) -> None:
        self._data: dict[int, tuple[weakref.ref, Any]] = {}
        if items is not None:
            self.update(items)

    def _remove(self, key_id: int) -> Any:
        def callback(_ref: weakref.ref) -> None:
            entry = self._data.get(key_id)
            if entry is not None and entry[0] is _ref:
                del self._data[key_id]
        return callback

    def __setitem__(self, key: Any, value: Any) -> None:
        self._data[id(key)] = (weakref.ref(key, self._remove(id(key))), value)

    def __getitem__(self, key: Any) -> Any:
        entry = self._data.get(id(key))
        if entry is None or entry[0]() is not key:
            raise KeyError(key)
        return entry[1]

    def __delitem__(self, key: Any) -> None:
        entry = self._data.get(id(key))
        if entry is None or entry[0]() is not key:
            raise KeyError(key)
        del self._data[id(key)]

    def __iter__(self) -> Iterator[Any]:
        for ref, _ in list(self._data.values()):
            obj = ref()
            if obj is not None:
                yield obj

    def __len__(self) -> int:
        return sum(1 for ref, _ in self._data.values() if ref() is not None)
