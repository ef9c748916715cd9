"""The cascade: a larger encoder re-orders the candidates MiniLM's ranker is least sure of.

all-mpnet-base-v2 orders a message's candidates better than MiniLM-L6 and tells requests
from near misses worse (docs/routing-log.md, the forty-fourth to forty-seventh rounds). So
MiniLM's side decides every message, and its gate's verdict (so every rejection) stands. For
an accepted message whose ranker margin (first probability less second) is below
:attr:`CascadeModel.margin`, a ranker fitted on the larger encoder's evidence re-orders the
candidates MiniLM's side kept, joined by the larger encoder's own ten best workflows (the
forty-eighth round's V+). The larger encoder is consulted only for those messages.

Its index of the catalog's texts is built behind the catalog, on one worker thread:
encoding 10,000 workflows takes the larger encoder minutes. Until the index is ready for
the catalog being served, MiniLM's order stands.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aptix.workflows.matching.exiting import (
    Closing,
    Stopped,
    exiting,
    start_tracked,
    until_exit,
)
from aptix.workflows.matching.fusion import FusionModel
from aptix.workflows.matching.lexical import MatchDocument
from aptix.workflows.matching.routing import WEIGHTS_FILE, Decision
from aptix.workflows.matching.semantic import (
    Embedder,
    SemanticMatcher,
)
from aptix.workflows.matching.stored import StoredEncodings

__all__ = ["Cascade", "CascadeModel", "default_cascade", "margin", "reorder"]

_log = logging.getLogger("aptix.workflows")


@dataclass(frozen=True, slots=True)
class CascadeModel:
    """``routing.json``'s ``cascade`` section: the larger encoder, its ranker and the margin."""

    #: The larger encoder, a name of :data:`~.semantic.MODELS`.
    encoder: str
    #: Fitted on the larger encoder's evidence, in :data:`~.routing.SEMANTIC_RANK` order.
    ranker: FusionModel
    #: Accepted decisions whose ranker margin is below this are re-ordered.
    margin: float

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {"encoder": self.encoder, "margin": self.margin, "ranker": self.ranker.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CascadeModel:
        """The model stored by :meth:`to_json`."""
        return cls(
            str(data["encoder"]), FusionModel.from_json(data["ranker"]), float(data["margin"])
        )


@functools.cache
def default_cascade() -> CascadeModel | None:
    """The shipped cascade model (``routing.json``'s semantic ``cascade``), if one was fitted."""
    # Read once per process, as default_routing is: parsing the 2 MB file took 0.6 s of every
    # runtime's start-up.
    data = json.loads(WEIGHTS_FILE.read_text(encoding="utf-8"))
    part = data["semantic"].get("cascade")
    return None if part is None else CascadeModel.from_json(part)


def margin(decision: Decision) -> float:
    """The ranker's first probability less its second (1.0 with one candidate)."""
    if len(decision.ranked) < 2:
        return 1.0
    return decision.ranked[0][1] - decision.ranked[1][1]


def reorder(
    first: Decision,
    probabilities: Mapping[str, float],
    stated: str | None,
    added: Collection[str] = (),
    builtin: Collection[str] = (),
) -> Decision:
    """``first``'s kept candidates and the ``added`` ones in the order of ``probabilities``.

    ``first``'s gate is unchanged. A stated pattern's workflow stays first, and the
    candidates ``first`` dropped (built-ins the message does not ask for) stay dropped; an
    added built-in joins only when ``first`` dropped none, since MiniLM's side decides whether
    the message asks for a built-in.
    """
    kept = {wid for wid, _ in first.ranked}
    considered = set(probabilities) - set(added)
    dropped_builtin = any(wid in builtin and wid not in kept for wid in considered)
    ids = kept | {wid for wid in added if not (dropped_builtin and wid in builtin)}
    order = sorted(ids, key=lambda wid: (wid != stated, -probabilities[wid], wid))
    return Decision(tuple((w, probabilities[w]) for w in order), first.gate, first.weak)


class Cascade:
    """The larger encoder's index of the catalog, built behind it, and when to consult it."""

    def __init__(
        self,
        embedder: Embedder,
        model: CascadeModel,
        store: StoredEncodings | None = None,
        closed: Closing | None = None,
    ) -> None:
        self._model = model
        #: Set by :meth:`close`; shared with every sibling, which the same runtime owns.
        self._closed = closed or Closing()
        #: The last index built, kept for its cache of encoded texts even once stale.
        self._last = SemanticMatcher(until_exit(embedder, self._closed), store=store)
        #: The index of the catalog being served; None while it is being built.
        self._ready: SemanticMatcher | None = None
        self._generation = 0
        self._pending: tuple[int, list[MatchDocument], Cascade | None] | None = None
        self._worker: threading.Thread | None = None
        self._changed = threading.Condition()

    @property
    def model(self) -> CascadeModel:
        """The larger ranker and its margin."""
        return self._model

    def sibling(self) -> Cascade:
        """An empty cascade of the same encoder and model, seeded with the texts encoded."""
        other = Cascade(self._last.embedder, self._model, closed=self._closed)
        other._last = self._last.sibling()
        return other

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (here or on a sibling): nothing is built."""
        return self._closed.is_set()

    def close(self) -> None:
        """Stop building, here and in every sibling: a build stops between two model calls."""
        self._closed.set()
        with self._changed:
            self._pending = None
            self._changed.notify_all()

    def build(self, documents: Sequence[MatchDocument], extends: Cascade | None = None) -> None:
        """Index ``documents`` behind the catalog; the current index stops serving at once.

        With ``extends`` (the deployment-wide cascade, for an org's), that cascade's build
        finishes first and its index lends this one the rows of the workflows both hold.
        """
        with self._changed:
            self._generation += 1
            self._pending = (self._generation, list(documents), extends)
            # A stale index lacks the new workflows' texts: no order is better than its.
            self._ready = None
            if self._worker is None and not self._closed.is_set():
                self._worker = start_tracked(self._work, "aptix-cascade-index")

    def _work(self) -> None:
        while True:
            with self._changed:
                if self._pending is None or exiting() or self._closed.is_set():
                    self._worker = None
                    self._changed.notify_all()
                    return
                generation, documents, extends = self._pending
                self._pending = None
                matcher = self._last.sibling(stored=True)
            lender = None
            if extends is not None:
                # Encoding the shared workflows twice would take minutes and twice the memory.
                extends.wait()
                lender = extends._last
            try:
                matcher.build(documents, lender)
            except Stopped:
                continue  # the loop's next turn sees the exit and ends the worker
            except Exception as exc:  # the larger encoder failing must leave MiniLM's order
                _log.warning(
                    "The cascade's index was not built, MiniLM's order stands: %s",
                    type(exc).__name__,
                )
                continue
            with self._changed:
                self._last = matcher
                if generation == self._generation:
                    self._ready = matcher

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no build is pending; True when an index is then serving."""
        with self._changed:
            self._changed.wait_for(lambda: self._worker is None, timeout)
            return self._ready is not None

    def wants(self, decision: Decision) -> bool:
        """The decision is accepted with a margin below the model's, and an index serves."""
        return (
            self._ready is not None and decision.accepted and margin(decision) < self._model.margin
        )

    @property
    def index(self) -> SemanticMatcher | None:
        """The larger encoder's index of the catalog being served; None while it is built."""
        return self._ready

    def reordered(
        self,
        decision: Decision,
        ids: Sequence[str],
        rows: NDArray[np.float64],
        stated: str | None,
        added: Collection[str] = (),
        builtin: Collection[str] = (),
    ) -> Decision:
        """``decision`` in the larger ranker's order of ``rows`` (one per id): :func:`reorder`."""
        p = self._model.ranker.probability(rows).tolist()
        return reorder(decision, dict(zip(ids, p, strict=True)), stated, added, builtin)
