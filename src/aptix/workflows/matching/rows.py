"""A matrix of text vectors that may lend most of its rows from another index's matrix.

An org that authors workflows is served its own workflows and every deployment-wide one, so
its semantic index holds the deployment-wide texts too. Copying their vectors cost each such
org tens of megabytes per thousand shared workflows; :class:`Rows` instead keeps a reference
to the deployment-wide matrix and a mapping from its own (logical) order into that matrix
followed by the rows it alone holds. Row values are the same floats either way, so scores do
not change.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["Rows", "Vectors", "dot"]

Vectors = NDArray[np.float32]


def dot(matrix: Vectors, query: Vectors) -> Vectors:
    """``matrix @ query`` on the calling thread.

    A threaded BLAS matrix-vector product waits for idle cores: on a busy server it took 40 to
    130 ms where one thread takes 1 ms (bench/workflows.py), so this loop stays out of BLAS.
    """
    out: Vectors = np.einsum("ij,j->i", matrix, query)
    return out


class Rows:
    """Vectors in a logical order, stored as a lent matrix followed by rows of one's own.

    ``where[i]`` is logical row ``i``'s position in the lent matrix stacked on the own one
    (never materialised); without a lent matrix the own matrix is the logical order itself.
    """

    __slots__ = ("_lent", "_own", "_split", "_where")

    def __init__(
        self,
        own: Vectors,
        lent: Vectors | None = None,
        where: NDArray[np.intp] | None = None,
    ) -> None:
        if (lent is None) != (where is None):
            raise ValueError("a lent matrix needs the mapping into it, and only it does")
        self._own = own
        self._lent = lent
        self._where = where
        self._split = 0 if lent is None else len(lent)

    @property
    def own(self) -> Vectors:
        """The rows held by this index alone (all of them when nothing is lent)."""
        return self._own

    @property
    def lends(self) -> bool:
        """Some rows are another index's matrix, referenced rather than copied."""
        return self._lent is not None

    def __len__(self) -> int:
        return len(self._own) if self._where is None else len(self._where)

    def span(self, start: int, end: int) -> Vectors:
        """Logical rows ``start:end``, which must lie together in one of the two matrices."""
        if self._where is None or self._lent is None:
            return self._own[start:end]
        at = int(self._where[start]) if end > start else 0
        if at < self._split:
            return self._lent[at : at + end - start]
        return self._own[at - self._split : at - self._split + end - start]

    def take(self, rows: NDArray[np.intp]) -> Vectors:
        """The logical ``rows``, gathered into a new matrix."""
        if self._where is None or self._lent is None:
            taken: Vectors = self._own[rows]
            return taken
        at = self._where[rows]
        inside = np.flatnonzero(at < self._split)
        if len(inside) == len(at):
            # Most candidates are shared workflows: one gather, as from a single matrix.
            lent: Vectors = self._lent[at]
            return lent
        outside = np.flatnonzero(at >= self._split)
        out = np.empty((len(rows), self._lent.shape[1]), dtype=np.float32)
        out[inside] = self._lent[at[inside]]
        out[outside] = self._own[at[outside] - self._split]
        return out

    def dot(self, query: Vectors) -> Vectors:
        """Every logical row's product with ``query``, in logical order."""
        if self._where is None or self._lent is None:
            return dot(self._own, query)
        both = np.concatenate([dot(self._lent, query), dot(self._own, query)])
        out: Vectors = both[self._where]
        return out

    def all(self) -> Vectors:
        """Every logical row, gathered into one matrix (the own matrix itself when no lending)."""
        if self._where is None:
            return self._own
        return self.take(np.arange(len(self._where), dtype=np.intp))
