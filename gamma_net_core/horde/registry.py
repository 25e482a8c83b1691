"""Registries: the extension points of the questions language, one entry per name.

Transforms (:mod:`gamma_net_core.horde.transforms`), aggregates of field paths
(:mod:`gamma_net_core.horde.fields`) and readout kinds (:mod:`gamma_net_core.horde.readouts`)
are each a :class:`Registry`: adding one is one :meth:`Registry.add` (its module's
``register_...`` decorator) and its tests, never a branch in an if-chain. A name nobody
registered is refused in one line naming it and the names there are; nothing falls through to
a default.

Usage::

    TRANSFORMS = Registry("transform")
    TRANSFORMS.add("abs", entry)
    TRANSFORMS["abs"]            # the entry
    TRANSFORMS["absolute"]       # ValueError: unknown transform 'absolute'; known: ['abs', ...]
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Entries by name, each registered once.

    Args:
      what: what an entry is, for error lines (``transform``, ``readout kind``).
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self._entries: dict[str, T] = {}

    def add(self, name: str, entry: T) -> T:
        """Register ``entry`` as ``name``; ValueError if the name is taken or not a plain word."""
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"a {self.what} name must be a word of letters, digits and _; got {name!r}")
        if name in self._entries:
            raise ValueError(f"{self.what} {name!r} is registered already")
        self._entries[name] = entry
        return entry

    def remove(self, name: str) -> None:
        """Unregister ``name`` (a test's or a plug-in's clean-up); ValueError for an unknown one."""
        self[name]
        del self._entries[name]

    def __getitem__(self, name: str) -> T:
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise ValueError(f"unknown {self.what} {name!r}; known: {self.names()}") from None

    def check(self, name: object, label: str) -> T:
        """The entry ``name``, or ValueError ``{label}: must be one of [...]; got 'name'`` (a file's key)."""
        if name not in self:
            raise ValueError(f"{label}: must be one of {self.names()}; got {name!r}")
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._entries)
