"""One ``matchScore`` from the lexical and (when installed) the semantic matcher.

``matchScore`` is in [0, 1]. Lexically it is the score of
:mod:`aptix.workflows.matching.lexical`. With the semantic matcher the cosine similarity is
first mapped onto [0, 1] (``SEMANTIC_FLOOR`` -> 0, ``SEMANTIC_CEILING`` -> 1, measured on the
evaluation set: unrelated messages stay below the floor, paraphrases reach the ceiling) and
blended with the lexical score. Results below ``MATCH_THRESHOLD`` are dropped: nothing is
better than a wrong workflow (TUL-006 §3.2).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.matching.lexical import LexicalMatcher, MatchDocument

if TYPE_CHECKING:  # numpy and the model are an optional extra
    from aptix.workflows.matching.semantic import SemanticMatcher

__all__ = [
    "MATCH_THRESHOLD",
    "WorkflowMatcher",
    "documents_for",
]

#: Below this ``matchScore`` a workflow is not returned as a match.
MATCH_THRESHOLD = 0.45
SEMANTIC_FLOOR = 0.30
SEMANTIC_CEILING = 0.75
SEMANTIC_WEIGHT = 0.6
#: How many candidates each matcher contributes before the blend.
CANDIDATES = 50

PATTERN_WEIGHT = 1.0
TITLE_WEIGHT = 0.9
DESCRIPTION_WEIGHT = 0.75


def documents_for(manifest: WorkflowManifest) -> list[MatchDocument]:
    """The texts a workflow is matched on: its intent patterns, title and description."""
    wid = manifest.workflow_id
    docs = [MatchDocument(wid, p, PATTERN_WEIGHT) for p in manifest.user_intent_patterns]
    if manifest.title:
        docs.append(MatchDocument(wid, manifest.title, TITLE_WEIGHT))
    if manifest.description:
        docs.append(MatchDocument(wid, manifest.description, DESCRIPTION_WEIGHT))
    return docs


def calibrate(cosine: float) -> float:
    """Map a cosine similarity onto [0, 1] with the measured floor and ceiling."""
    scaled = (cosine - SEMANTIC_FLOOR) / (SEMANTIC_CEILING - SEMANTIC_FLOOR)
    return min(1.0, max(0.0, scaled))


class WorkflowMatcher:
    """Ranks workflow ids for a message; rebuilt whenever the catalog changes."""

    def __init__(self, semantic: SemanticMatcher | None = None) -> None:
        self._lexical = LexicalMatcher()
        self._semantic = semantic

    @property
    def semantic(self) -> SemanticMatcher | None:
        """The semantic matcher, when one is configured."""
        return self._semantic

    def rebuild(self, manifests: Iterable[WorkflowManifest]) -> None:
        """Index the manifests (the semantic cache re-encodes only changed texts)."""
        documents = [doc for m in manifests for doc in documents_for(m)]
        self._lexical.build(documents)
        if self._semantic is not None:
            self._semantic.build(documents)

    def rank(self, message: str, limit: int = 10) -> list[tuple[str, float]]:
        """Up to ``limit`` ``(workflow id, matchScore)`` pairs at or above the threshold."""
        return [(w, s) for w, s in self.score(message, limit) if s >= MATCH_THRESHOLD]

    def score(self, message: str, limit: int = 10) -> list[tuple[str, float]]:
        """The best ``limit`` candidates with their ``matchScore``, threshold not applied."""
        lexical = dict(self._lexical.match(message, CANDIDATES))
        if self._semantic is None:
            blended = lexical
        else:
            semantic = self._semantic.rank(message, CANDIDATES, also=lexical)
            blended = {
                wid: blend(lexical.get(wid, 0.0), calibrate(cosine))
                for wid, cosine in semantic.items()
            }
        ranked = sorted(blended.items(), key=lambda item: (-item[1], item[0]))
        return [(wid, round(score, 4)) for wid, score in ranked[:limit]]


def blend(lexical: float, semantic: float) -> float:
    """The combined score of the two matchers' scores (each in [0, 1])."""
    return SEMANTIC_WEIGHT * semantic + (1.0 - SEMANTIC_WEIGHT) * lexical
