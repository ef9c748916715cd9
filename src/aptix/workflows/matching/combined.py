"""Matching a message to workflows: candidates, the ranker's order, the gate's verdict.

Each matcher (lexical, workflow-level BM25 and, when installed, semantic) proposes its best
candidates. For their union, :mod:`.evidence` and the semantic matcher compute per-candidate
evidence; the ranker (:mod:`.routing`) orders the candidates and the gate decides whether the
message asks for a workflow at all. ``matchScore`` is the gate's probability for the first
candidate, scaled down by rank for the others; a message the gate rejects matches nothing:
nothing is better than a wrong workflow (TUL-006 §3.2).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.matching.cues import CUES, message_cues
from aptix.workflows.matching.evidence import WorkflowIndex
from aptix.workflows.matching.lexical import LexicalMatcher, MatchDocument
from aptix.workflows.matching.routing import (
    BUILTIN_VETO,
    LEXICAL_BUILTIN_VETO,
    LEXICAL_GATE,
    LEXICAL_RANK,
    SEMANTIC_GATE,
    SEMANTIC_RANK,
    SEMANTIC_WORD_VETO,
    WEAK_CHAR,
    WEAK_COVER,
    WEAK_PATTERN,
    BuiltinModel,
    Decision,
    Routing,
    default_routing,
)
from aptix.workflows.matching.stated import StatedPatterns
from aptix.workflows.matching.text import normalise, readable, terms
from aptix.workflows.matching.words import word_features

if TYPE_CHECKING:  # the model runtime is an optional extra
    from aptix.workflows.matching.cascade import Cascade
    from aptix.workflows.matching.semantic import SemanticMatcher

__all__ = [
    "Candidates",
    "RankedWorkflow",
    "WorkflowMatcher",
    "decide",
    "documents_for",
    "with_associations",
]

#: How many candidates each matcher contributes.
CANDIDATES = 10
#: With no shared word at all, a message must be at least this close to a pattern.
MIN_SEMANTIC_ONLY = 0.3
#: The gate counts a message's content terms up to this many.
MAX_COUNTED_TERMS = 20
#: The gate's probability at least, when the message states a workflow's intent pattern.
STATED_GATE = 0.9
#: The ranker column of a candidate's character n-gram cosine (the same in both configurations).
CHAR_COLUMN = LEXICAL_RANK.index("char")
#: The ranker column where the semantic evidence starts (a score, then its margin, each).
SEMANTIC_COLUMN = SEMANTIC_RANK.index("pattern")
#: Past this many characters a message is cut before matching: intent is stated early.
MAX_MATCH_CHARS = 2_000


def documents_for(manifest: WorkflowManifest) -> list[MatchDocument]:
    """The texts a workflow is matched on: every intent pattern, its title and description."""
    wid = manifest.workflow_id
    docs = [MatchDocument(wid, p) for p in manifest.user_intent_patterns]
    if manifest.title:
        docs.append(MatchDocument(wid, manifest.title, kind="title"))
    if manifest.description:
        docs.append(MatchDocument(wid, manifest.description, kind="description"))
    return docs


@dataclass(frozen=True, slots=True)
class RankedWorkflow:
    """One ranked workflow: its id, ``matchScore`` and why it matched."""

    workflow_id: str
    score: float
    why: str


@dataclass(frozen=True, slots=True)
class Candidates:
    """A message's candidate workflows: ranker evidence (one row each) and gate evidence.

    ``message`` holds the gate's features after the two the ranker supplies (``rank_top``,
    ``rank_margin``), in :data:`~.routing.LEXICAL_GATE` / :data:`~.routing.SEMANTIC_GATE`
    order.
    """

    ids: list[str]
    features: NDArray[np.float64]
    message: NDArray[np.float64]
    #: The workflow whose intent pattern the message states outright (:mod:`.stated`).
    stated: str | None = None
    #: P(the message asks for a built-in workflow), from :class:`~.routing.BuiltinModel`'s
    #: embedding model; 1.0 without one.
    builtin: float = 1.0
    #: The same, from its word model; 1.0 without one.
    builtin_words: float = 1.0


class WorkflowMatcher:
    """Ranks and gates workflow ids for a message; rebuilt whenever the catalog changes."""

    def __init__(
        self,
        semantic: SemanticMatcher | None = None,
        model: Routing | None = None,
        cascade: Cascade | None = None,
    ) -> None:
        self._lexical = LexicalMatcher()
        self._stated = StatedPatterns()
        self._index = WorkflowIndex()
        self._semantic = semantic
        self._model = model or default_routing(semantic is not None)
        #: A larger encoder re-ordering unsure decisions (:mod:`.cascade`); semantic only.
        self._cascade = cascade if semantic is not None else None
        #: The matcher this one is a sibling of: its indexes lend this one's their rows.
        self._extends: WorkflowMatcher | None = None

    @property
    def semantic(self) -> SemanticMatcher | None:
        """The semantic matcher, when one is configured."""
        return self._semantic

    @property
    def model(self) -> Routing:
        """The ranker and gate turning evidence into decisions."""
        return self._model

    @property
    def cascade(self) -> Cascade | None:
        """The larger encoder's re-ordering, when one is configured."""
        return self._cascade

    def sibling(self) -> WorkflowMatcher:
        """An empty matcher of the same configuration, sharing the loaded model (per org).

        Its semantic indexes extend this matcher's: the vectors of the workflows both serve
        are this one's, referenced rather than copied.
        """
        semantic = None if self._semantic is None else self._semantic.sibling()
        cascade = None if self._cascade is None else self._cascade.sibling()
        other = WorkflowMatcher(semantic, self._model, cascade)
        other._extends = self
        return other

    def close(self) -> None:
        """Stop the index builds running behind this matcher and its siblings."""
        if self._cascade is not None:
            self._cascade.close()

    def rebuild(self, manifests: Iterable[WorkflowManifest]) -> None:
        """Index the manifests (the semantic cache re-encodes only changed texts)."""
        manifests = list(manifests)
        documents = [doc for m in manifests for doc in documents_for(m)]
        base = self._extends
        self._lexical.build(documents, None if base is None else base._lexical)
        self._stated.build(manifests)
        texts: dict[str, list[str]] = {}
        for doc in documents:
            texts.setdefault(doc.owner, []).append(doc.text)
        self._index.build(texts, self._lexical.owner_terms(), None if base is None else base._index)
        if self._semantic is not None:
            self._semantic.build(documents, None if base is None else base._semantic)
        if self._cascade is not None:
            self._cascade.build(documents, None if base is None else base._cascade)

    def rank(self, message: str, limit: int = 10) -> list[tuple[str, float]]:
        """Up to ``limit`` accepted ``(workflow id, matchScore)`` pairs, best first."""
        return self.decide(message).matches(limit)

    def explain(self, message: str, limit: int = 10) -> list[RankedWorkflow]:
        """Like :meth:`rank`, with the pattern or terms each match rests on."""
        return [
            RankedWorkflow(wid, score, self._why(message, wid))
            for wid, score in self.rank(message, limit)
        ]

    def why(self, message: str, workflow_id: str) -> str:
        """The pattern or terms a match of ``workflow_id`` rests on."""
        return self._why(message, workflow_id)

    def decide(self, message: str) -> Decision:
        """The ranker's order of the candidates and the gate's probability."""
        found = self.candidates(message)
        decision = self.decision(found)
        if self._cascade is not None and self._cascade.wants(decision):
            decision = self._cascaded(self._cascade, message, found, decision)
        return decision

    def _cascaded(
        self, cascade: Cascade, message: str, found: Candidates, decision: Decision
    ) -> Decision:
        """``decision`` re-ordered by the larger encoder's ranker (:mod:`.cascade`).

        The candidates are ``found``'s and the larger encoder's own best, all with fresh
        evidence: each margin is over the runner-up among them all.
        """
        index = cascade.index
        if index is None:
            return decision
        text = matched_text(message)
        added = set(index.rank(text, CANDIDATES)) - set(found.ids)
        wide = self.candidates(message, added) if added else found
        semantic = index.evidence(text, wide.ids)
        rows = wide.features.copy()
        rows[:, SEMANTIC_COLUMN::2] = semantic
        rows[:, SEMANTIC_COLUMN + 1 :: 2] = _margins(semantic)
        builtin = () if self._model.builtin is None else self._model.builtin.ids
        return cascade.reordered(decision, wide.ids, rows, wide.stated, added, builtin)

    def decision(self, found: Candidates) -> Decision:
        """The ranker's order and the gate's verdict for already computed evidence."""
        return decide(self._model, found)

    def candidates(self, message: str, extra: Collection[str] = ()) -> Candidates:
        """The union of the matchers' best candidates, and ``extra``, with their evidence."""
        text = matched_text(message)
        gate_width = len(SEMANTIC_GATE if self._semantic is not None else LEXICAL_GATE) - 2
        width = len(self._model.ranker.features)
        empty = Candidates([], np.zeros((0, width)), np.zeros(gate_width))
        # No Latin letters or digits (emoji, punctuation, other scripts): nothing to match.
        if not normalise(text):
            return empty
        if self._semantic is not None:
            # The message is encoded on another thread while the lexical evidence is gathered.
            self._semantic.prefetch(text)
        query = self._lexical.query_terms(text)
        lexical = dict(self._lexical.match(text, CANDIDATES))
        bm25_all = self._index.bm25(query)
        bm25 = self._index.top(bm25_all, CANDIDATES)
        # What needs no candidates is read before the semantic ranking waits for the encoding.
        grams = self._index.query_grams(text)
        known = self._lexical.known_share(text)
        content = terms(text)
        cues = message_cues(text)
        stated = self._stated.find(text, negated=bool(cues[CUES.index("negated")]))
        semantic: dict[str, float] = {}
        if self._semantic is not None:
            semantic = self._semantic.rank(text, CANDIDATES)
        ids = sorted(set(lexical) | set(bm25) | set(semantic) | set(extra))
        if not ids:
            return empty
        lex = np.asarray([lexical.get(w, 0.0) for w in ids])
        bm = self._index.select(bm25_all, ids)
        char = self._index.char_cosine(grams, ids)
        contrast = self._index.contrast(query, ids)
        sem = None if self._semantic is None else self._semantic.evidence(text, ids)
        features = _with_margins(np.column_stack([lex, bm, char]), contrast, sem)
        if sem is None:
            features = _with_associations(features, self._associations(content, ids))
        message_row = [
            float(lex.max()),
            float(bm.max()),
            float(char.max()),
            known,
            # Capped: a very long message is not more of a request than a long one.
            math.log1p(min(len(content), MAX_COUNTED_TERMS)),
            *cues,
            self._model.form.score(text) if self._model.form is not None else 0.0,
        ]
        builtin = 1.0
        fitted = self._model.builtin
        # The message's words, read once for both word models.
        words = word_features(text)
        builtin_words = 1.0
        if fitted is not None and fitted.words is not None:
            builtin_words = fitted.words.probability_of(words)
        if self._semantic is None:
            message_row.append(self._request_words(words))
        elif sem is not None:
            message_row += [float(sem[:, k].max()) for k in (0, 1, 2, 5)]
            vector = self._semantic.embed_query(text).astype(np.float64)
            message_row.append(self._request_probability(vector))
            model = None if fitted is None else fitted.model
            if fitted is not None and model is not None and vector.shape[0] == len(model.mean):
                builtin = fitted.probability(vector)
        row = np.asarray(message_row)
        return Candidates(ids, features, row, stated, builtin, builtin_words)

    def _associations(self, content: list[str], ids: list[str]) -> NDArray[np.float64]:
        associations = self._model.associations
        if associations is None:
            return np.zeros(len(ids))
        return self._index.associations(associations, content, ids)

    def workflow_terms(self, ids: list[str]) -> list[frozenset[str]]:
        """Each workflow's content terms as the word associations read them."""
        return self._index.terms_of(ids)

    def _request_words(self, features: frozenset[str]) -> float:
        words = self._model.words
        if words is None:
            # No lexical request model (a routing fitted without one): the gate's training
            # mean, so the feature adds nothing to the gate's logit.
            gate = self._model.gate
            return gate.mean[gate.features.index("request_words")]
        return words.probability_of(features)

    def _request_probability(self, vector: NDArray[np.float64]) -> float:
        request = self._model.request
        if request is None or vector.shape[0] != len(request.mean):
            # Another embedding model than the request model was fitted on: no evidence, so
            # the gate's training mean (it then adds nothing to the gate's logit).
            return self._model.gate.mean[self._model.gate.features.index("request_model")]
        return float(request.probability(vector[None, :])[0])

    def _why(self, message: str, workflow_id: str) -> str:
        reasons = []
        if self._semantic is not None:
            best = self._semantic.best_text(matched_text(message), workflow_id)
            if best is not None:
                reasons.append(f'closest to "{best[0]}" (similarity {best[1]:.2f})')
        shared = self._lexical.shared_terms(matched_text(message), workflow_id)
        if shared:
            reasons.append("shared terms: " + ", ".join(shared))
        return "; ".join(reasons) or "weak overall similarity"


def matched_text(message: str) -> str:
    """The part of ``message`` that is matched: its first characters, as a terminal shows them."""
    return readable(message[:MAX_MATCH_CHARS])


def decide(model: Routing, found: Candidates) -> Decision:
    """The ranker's order and the gate's verdict of ``model`` for one message's evidence."""
    if not found.ids:
        return Decision((), 0.0)
    p = model.rank(found.features).tolist()
    order = sorted(range(len(p)), key=lambda i: (-p[i], found.ids[i]))
    top = p[order[0]]
    second = p[order[1]] if len(order) > 1 else 0.0
    gate = model.gate_probability(np.concatenate([[top, top - second], found.message]))
    if _no_evidence(found.message):
        gate = 0.0
    weak = _weak_fit(found.message)
    if found.stated in found.ids:
        # A stated pattern is a plain request: its workflow goes first and is accepted.
        stated = found.ids.index(found.stated)
        order = [stated, *(i for i in order if i != stated)]
        gate = max(gate, STATED_GATE)
    ranked = tuple((found.ids[i], p[i]) for i in order)
    builtin = model.builtin
    if (
        builtin is not None
        and found.stated not in found.ids
        and ranked[0][0] in builtin.ids
        and _not_for_builtin(builtin, found, order[0])
    ):
        # The gate judges whether the message asks for *a* workflow, not for which: a
        # request the catalog lacks goes to no one rather than to the greeting workflow, and
        # the arbiter is not shown built-ins either. What is left may be nothing. (A
        # rejected decision matches nothing anyway.)
        ranked = tuple(r for r in ranked if r[0] not in builtin.ids)
    return Decision(ranked, gate, weak)


def _not_for_builtin(builtin: BuiltinModel, found: Candidates, first: int) -> bool:
    """The message asks for none of the built-ins, though one comes first.

    With the semantic extra the embedding model says so (:data:`~.routing.BUILTIN_VETO`) or
    the word model does (:data:`~.routing.SEMANTIC_WORD_VETO`); without it, the word model
    does (:data:`~.routing.LEXICAL_BUILTIN_VETO`) or the first built-in's character n-grams
    barely meet the message's.
    """
    if builtin.model is not None:
        words_say_no = builtin.words is not None and found.builtin_words < SEMANTIC_WORD_VETO
        return words_say_no or found.builtin < BUILTIN_VETO
    if builtin.words is not None and found.builtin_words < LEXICAL_BUILTIN_VETO:
        return True
    return bool(found.features[first, CHAR_COLUMN] < WEAK_CHAR)


def _weak_fit(message: NDArray[np.float64]) -> bool:
    """Nothing in the catalog is close to the message: see :attr:`.routing.Decision.weak`."""
    if len(message) == len(LEXICAL_GATE) - 2:
        return bool(message[LEXICAL_GATE.index("char_max") - 2] < WEAK_CHAR)
    if len(message) != len(SEMANTIC_GATE) - 2:
        return False
    pattern = message[SEMANTIC_GATE.index("pattern_max") - 2]
    cover = message[SEMANTIC_GATE.index("cover_max") - 2]
    return bool(pattern < WEAK_PATTERN and cover < WEAK_COVER)


def _no_evidence(message: NDArray[np.float64]) -> bool:
    """No shared word and no close pattern: a floor under the gate, whatever it extrapolates.

    The gate is linear; far outside its training data (100 kB of repeated chat) it can
    accept a message that shares nothing with any workflow.
    """
    if len(message) < len(SEMANTIC_GATE) - 2:
        return False
    pattern = SEMANTIC_GATE.index("pattern_max") - 2
    return bool(message[0] == 0.0 and message[1] == 0.0 and message[pattern] < MIN_SEMANTIC_ONLY)


def _with_margins(
    lexical: NDArray[np.float64],
    contrast: NDArray[np.float64],
    semantic: NDArray[np.float64] | None,
) -> NDArray[np.float64]:
    """The ranker's rows: each score followed by its margin, the contrast after the lexical ones.

    In :data:`~.routing.LEXICAL_RANK` / :data:`~.routing.SEMANTIC_RANK` order.
    """
    blocks = [lexical] if semantic is None else [lexical, semantic]
    width = sum(2 * b.shape[1] for b in blocks) + 1
    out = np.empty((len(contrast), width))
    lexical_width = 2 * lexical.shape[1]
    out[:, 0:lexical_width:2] = lexical
    out[:, 1:lexical_width:2] = _margins(lexical)
    out[:, lexical_width] = contrast
    if semantic is not None:
        out[:, lexical_width + 1 :: 2] = semantic
        out[:, lexical_width + 2 :: 2] = _margins(semantic)
    return out


def _with_associations(
    features: NDArray[np.float64], associations: NDArray[np.float64]
) -> NDArray[np.float64]:
    """The lexical ranker's rows: the word association and its margin after the rest."""
    column = associations[:, None]
    return np.hstack([features, column, _margins(column)])


def with_associations(found: Candidates, associations: NDArray[np.float64]) -> Candidates:
    """Lexical ``found`` with its word-association evidence replaced (fold evaluation)."""
    if not found.ids:
        return found
    return replace(found, features=_with_associations(found.features[:, :-2], associations))


def _margins(scores: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per column, each score minus the best other score (positive only for a clear winner)."""
    count = scores.shape[0]
    if count == 1:
        return scores.copy()
    second, best = np.partition(scores, count - 2, axis=0)[count - 2 :]
    out: NDArray[np.float64] = np.where(scores == best, scores - second, scores - best)
    return out
