"""The ``k`` largest entries of an array, ties to the lower index: the same on every CPU.

``np.argpartition`` picks among equal values as its implementation goes, and NumPy picks the
implementation by the CPU: with AVX-512 (x86-simd-sort) it keeps other tied entries than with
AVX2 or none. A catalog of near-duplicate workflows ties often, so the candidates a message
got, and now and then the workflow it matched, depended on the machine. Here the entries kept
are those a stable descending sort puts first, whatever the CPU.

It is also faster on the arrays matching selects from (thousands of entries, ``k`` a few
dozen): the smallest of ``k`` block maxima is a floor no entry of the top ``k`` is below
(``k`` distinct entries reach it), and usually only a few hundred entries clear it, so the
exact cut is found among those.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["largest"]


def largest(values: NDArray[np.floating], k: int) -> NDArray[np.intp]:
    """Indices of the ``k`` largest of ``values`` (ties to the lower index), ascending."""
    count = len(values)
    if k <= 0:
        return np.zeros(0, dtype=np.intp)
    if count <= k:
        return np.arange(count, dtype=np.intp)
    starts = (np.arange(k, dtype=np.intp) * count) // k
    floor = np.maximum.reduceat(values, starts).min()
    above = np.flatnonzero(values >= floor)
    if len(above) < k:
        # A NaN makes the floor NaN, and nothing reaches it: sort instead (NaNs go last).
        return np.sort(np.argsort(-values, kind="stable")[:k])
    kept = values[above]
    cut = np.partition(kept, len(kept) - k)[len(kept) - k]
    higher = kept > cut
    level = kept == cut
    # Of the entries equal to the cut, the lowest-indexed fill the places left.
    level &= np.cumsum(level) <= k - np.count_nonzero(higher)
    out: NDArray[np.intp] = above[higher | level]
    return out
