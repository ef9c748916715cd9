"""Process-wide caches of matching, bounded by the bytes of what they hold.

A cache kept by each index grew with the number of indexes: every org that authors workflows
has one of its own, so a deployment of 60 such orgs kept 60 full caches (gigabytes of encoded
messages). The caches here are one per process, whatever the number of orgs, and each is
bounded by the measured size of its entries (docs/deployment.md, "Memory"). An index's
entries are told apart by a number it draws from :func:`new_number`; once the index is
rebuilt or dropped they are never read again and leave as the least recently used.
"""

from __future__ import annotations

import itertools
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar, overload

__all__ = ["ENTRY_BYTES", "BoundedCache", "new_number", "number_of", "text_bytes"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
D = TypeVar("D")

#: What an entry costs beyond its own objects: its slot and link in the ordered dict, the
#: key tuple and the int in it, the (value, size) pair (tracemalloc: about 220; counted high).
ENTRY_BYTES = 320

_NUMBERS = itertools.count(1)
_NUMBERED: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()
_NUMBERING = threading.Lock()


def new_number() -> int:
    """A number no index or encoder of the process had before (never reused)."""
    return next(_NUMBERS)


def number_of(thing: object) -> int:
    """The same number for the same object as long as it lives; a new one for another.

    An object that cannot be referenced weakly gets a new number each time (its entries are
    then shared by nobody, but still bounded).
    """
    with _NUMBERING:
        try:
            found = _NUMBERED.get(thing)
            if found is None:
                found = _NUMBERED[thing] = new_number()
        except TypeError:
            return new_number()
        return found


def text_bytes(text: str) -> int:
    """What a string takes in memory."""
    return sys.getsizeof(text)


class BoundedCache(Generic[K, V]):
    """A least-recently-used map bounded by the bytes its entries were measured to take."""

    def __init__(self, limit: int) -> None:
        #: The bound, in bytes; the least recently used entries leave until it holds.
        self.limit = limit
        self._lock = threading.Lock()
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0

    @property
    def nbytes(self) -> int:
        """The measured size of every entry held."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def get(self, key: K) -> V | None: ...

    @overload
    def get(self, key: K, default: D) -> V | D: ...

    def get(self, key: K, default: object = None) -> object:
        """The value kept under ``key`` (now the most recently used), or ``default``."""
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return default
            self._items.move_to_end(key)
            return found[0]

    def put(self, key: K, value: V, size: int) -> None:
        """Keep ``value``, which takes ``size`` bytes, under ``key``; older entries may leave."""
        size += ENTRY_BYTES
        if size > self.limit:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._items[key] = (value, size)
            self._bytes += size
            self._shrink()

    def grew(self, key: K, size: int) -> None:
        """The value under ``key`` was added ``size`` bytes to (nothing if it has left)."""
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return
            self._items[key] = (found[0], found[1] + size)
            self._bytes += size
            self._shrink()

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._items.clear()
            self._bytes = 0

    def _shrink(self) -> None:
        while self._bytes > self.limit and self._items:
            self._bytes -= self._items.popitem(last=False)[1][1]
