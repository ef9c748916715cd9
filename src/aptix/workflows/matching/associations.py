"""Word associations learned across catalogs: the lexical ranker's bridge between words.

A message often names what happened ("a customer slipped on the wet floor") where the right
workflow names what to do ("log an injury incident"): no shared word, so the lexical score,
BM25 and the character n-grams all miss it. :class:`Associations` holds, for a message term
``m`` and a workflow term ``w``, how much more often a candidate workflow whose texts hold
``w`` is the right one when the message holds ``m``, as a smoothed log-odds over the base
rate (a translation model in the sense of Berger and Lafferty, 1999, fitted
discriminatively over each training message's candidates). A pair is kept only when it was
seen with the right workflow in at least two training catalogs, so what ships is what
carried over between domains ("clash" → "move", "slip" → "injury"), not one catalog's names.

A candidate's evidence is the sum, over the message's terms, of the strongest association
with any of the candidate's terms. Fitted by ``python -m bench.fit_routing`` on the training
catalogs only and read by the lexical configuration (the semantic one has the encoder).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["Associations"]


@dataclass(frozen=True, slots=True)
class Associations:
    """For each message term, the workflow terms it points to and how strongly (all > 0)."""

    rows: Mapping[str, Mapping[str, float]]

    def scores(
        self, message_terms: Iterable[str], candidates: Sequence[frozenset[str]]
    ) -> NDArray[np.float64]:
        """Per candidate (its terms), the sum over the message's terms of the best association.

        The reference the fits read; a matcher reads the same through its catalog's index
        (:meth:`~.evidence.WorkflowIndex.associations`), which caches each term's best per
        workflow.
        """
        out = np.zeros(len(candidates))
        rows = [row for t in dict.fromkeys(message_terms) if (row := self.rows.get(t))]
        for k, held in enumerate(candidates):
            total = 0.0
            for row in rows:
                total += max((a for w, a in row.items() if w in held), default=0.0)
            out[k] = total
        return out

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict in sorted order (the file is byte-stable)."""
        return {
            m: {w: round(a, 4) for w, a in sorted(row.items())}
            for m, row in sorted(self.rows.items())
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Mapping[str, float]]) -> Associations:
        """The associations stored by :meth:`to_json`."""
        return cls({str(m): {str(w): float(a) for w, a in row.items()} for m, row in data.items()})
