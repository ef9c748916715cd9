"""Per-message scratch arrays, lent from a pool and handed back zeroed.

Matching a message against a large catalog adds into arrays with one entry per document,
workflow or n-gram. A fresh array per message (hundreds of kB at 10,000 workflows) can cost
more in page faults than the arithmetic, so each index keeps a few and lends them out. The
borrower zeroes the entries it set before handing an array back, which costs what setting
them did rather than what the whole array does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

__all__ = ["ScratchPool"]

#: Arrays kept per pool: one per match running at once.
POOL_SIZE = 8

Item = TypeVar("Item", bound=np.generic)


class ScratchPool(Generic[Item]):
    """Zeroed arrays of one size and type; safe to borrow from several threads."""

    def __init__(self, size: int, dtype: type[Item]) -> None:
        self._size = size
        self._dtype = dtype
        self._free: list[NDArray[Item]] = []

    @contextlib.contextmanager
    def borrow(self) -> Iterator[NDArray[Item]]:
        """A zeroed array; whoever borrows it zeroes what they set before the block ends.

        An array whose block raised is dropped, not returned: it may hold stray values.
        """
        try:
            array = self._free.pop()  # list.pop and append are atomic: no lock needed
        except IndexError:
            array = np.zeros(self._size, dtype=self._dtype)
        yield array
        if len(self._free) < POOL_SIZE:
            self._free.append(array)
