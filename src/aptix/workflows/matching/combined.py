"""One calibrated ``matchScore`` from the lexical and (when installed) the semantic matcher.

Each matcher proposes its best candidates; for the union of both, :mod:`.fusion` computes
features (each matcher's score, margin over the runner-up and whether it ranks the candidate
first, plus message cues) and a fitted logistic model turns them into the probability that the
candidate is what the user means. That probability is ``matchScore``; candidates below
``MATCH_THRESHOLD`` are dropped: nothing is better than a wrong workflow (TUL-006 §3.2).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.matching.fusion import (
    FusionModel,
    default_model,
    message_cues,
    request_model,
)
from aptix.workflows.matching.lexical import LexicalMatcher, MatchDocument
from aptix.workflows.matching.text import terms

if TYPE_CHECKING:  # the model runtime is an optional extra
    from aptix.workflows.matching.semantic import SemanticMatcher

__all__ = [
    "MATCH_THRESHOLD",
    "Candidates",
    "RankedWorkflow",
    "WorkflowMatcher",
    "documents_for",
]

#: Below this ``matchScore`` (a calibrated probability) a workflow is not returned as a match.
MATCH_THRESHOLD = 0.45
#: How many candidates each matcher contributes to the fusion.
CANDIDATES = 20
#: Past this many characters a message is cut before matching: intent is stated early.
MAX_MATCH_CHARS = 2_000


def documents_for(manifest: WorkflowManifest) -> list[MatchDocument]:
    """The texts a workflow is matched on: every intent pattern, its title and description."""
    wid = manifest.workflow_id
    docs = [MatchDocument(wid, p) for p in manifest.user_intent_patterns]
    if manifest.title:
        docs.append(MatchDocument(wid, manifest.title))
    if manifest.description:
        docs.append(MatchDocument(wid, manifest.description))
    return docs


@dataclass(frozen=True, slots=True)
class RankedWorkflow:
    """One ranked workflow: its id, ``matchScore`` and why it matched."""

    workflow_id: str
    score: float
    why: str


@dataclass(frozen=True, slots=True)
class Candidates:
    """The candidate workflows of one message and their fusion features (one row each)."""

    ids: list[str]
    features: np.ndarray


class WorkflowMatcher:
    """Ranks workflow ids for a message; rebuilt whenever the catalog changes."""

    def __init__(
        self, semantic: SemanticMatcher | None = None, model: FusionModel | None = None
    ) -> None:
        self._lexical = LexicalMatcher()
        self._semantic = semantic
        self._model = model or default_model(semantic is not None)
        self._request = request_model() if semantic is not None else None

    @property
    def semantic(self) -> SemanticMatcher | None:
        """The semantic matcher, when one is configured."""
        return self._semantic

    @property
    def model(self) -> FusionModel:
        """The fusion model turning evidence into ``matchScore``."""
        return self._model

    def sibling(self) -> WorkflowMatcher:
        """An empty matcher of the same configuration, sharing the loaded model (per org)."""
        semantic = None if self._semantic is None else self._semantic.sibling()
        return WorkflowMatcher(semantic, self._model)

    def rebuild(self, manifests: Iterable[WorkflowManifest]) -> None:
        """Index the manifests (the semantic cache re-encodes only changed texts)."""
        documents = [doc for m in manifests for doc in documents_for(m)]
        self._lexical.build(documents)
        if self._semantic is not None:
            self._semantic.build(documents)

    def rank(self, message: str, limit: int = 10) -> list[tuple[str, float]]:
        """Up to ``limit`` ``(workflow id, matchScore)`` pairs at or above the threshold."""
        return [(w, s) for w, s in self.score(message, limit) if s >= MATCH_THRESHOLD]

    def explain(self, message: str, limit: int = 10) -> list[RankedWorkflow]:
        """Like :meth:`rank`, with the pattern or terms each match rests on."""
        return [
            RankedWorkflow(wid, score, self._why(message, wid))
            for wid, score in self.rank(message, limit)
        ]

    def score(self, message: str, limit: int = 10) -> list[tuple[str, float]]:
        """The best ``limit`` candidates with their ``matchScore``, threshold not applied."""
        found = self.candidates(message)
        if not found.ids:
            return []
        probability = self._model.probability(found.features)
        ranked = sorted(zip(found.ids, probability.tolist(), strict=True), key=_by_score)
        return [(wid, round(p, 4)) for wid, p in ranked[:limit]]

    def candidates(self, message: str) -> Candidates:
        """The union of both matchers' best candidates with their fusion features."""
        text = message[:MAX_MATCH_CHARS]
        lexical = dict(self._lexical.match(text, CANDIDATES))
        semantic: dict[str, float] = {}
        if self._semantic is not None and text.strip():
            semantic = self._semantic.rank(text, CANDIDATES, also=lexical)
        ids = sorted(set(lexical) | set(semantic))
        if not ids:
            return Candidates([], np.zeros((0, len(self._model.features))))
        cues = message_cues(text, len(terms(text)))
        lex = np.asarray([lexical.get(w, 0.0) for w in ids])
        columns = [lex, _margin(lex), _is_top(lex), *(np.full(len(ids), c) for c in cues)]
        if self._semantic is None or self._request is None:
            return Candidates(ids, np.column_stack(columns))
        floor = min(semantic.values()) if semantic else 0.0
        sem = np.asarray([semantic.get(w, floor) for w in ids])
        top2, centroid = self._semantic.profile(text, ids)
        request = self._request_probability(self._semantic, self._request, text)
        columns += [sem, _margin(sem), _is_top(sem), top2, centroid, np.full(len(ids), request)]
        return Candidates(ids, np.column_stack(columns))

    def _request_probability(
        self, semantic: SemanticMatcher, request: FusionModel, text: str
    ) -> float:
        query = semantic.embed_query(text)
        if query.shape[0] != len(request.mean):
            # Another embedding model than the request model was fitted on: no evidence, so
            # the feature's training mean (it then adds nothing to the fused logit).
            return self._model.mean[self._model.features.index("request")]
        return float(request.probability(query[None, :].astype(np.float64))[0])

    def _why(self, message: str, workflow_id: str) -> str:
        reasons = []
        if self._semantic is not None:
            best = self._semantic.best_text(message[:MAX_MATCH_CHARS], workflow_id)
            if best is not None:
                reasons.append(f'closest to "{best[0]}" (similarity {best[1]:.2f})')
        shared = self._lexical.shared_terms(message[:MAX_MATCH_CHARS], workflow_id)
        if shared:
            reasons.append("shared terms: " + ", ".join(shared))
        return "; ".join(reasons) or "weak overall similarity"


def _by_score(item: tuple[str, float]) -> tuple[float, str]:
    return -item[1], item[0]


def _margin(scores: np.ndarray) -> np.ndarray:
    """Each score minus the best other score (positive only for a clear winner)."""
    if len(scores) == 1:
        return scores.copy()
    order = np.sort(scores)
    best, second = order[-1], order[-2]
    out: np.ndarray = np.where(scores == best, scores - second, scores - best)
    return out


def _is_top(scores: np.ndarray) -> np.ndarray:
    top = np.zeros(len(scores))
    if len(scores) and scores.max() > 0:
        top[int(np.argmax(scores))] = 1.0
    return top
