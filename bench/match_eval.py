"""The matching evaluation protocol: evidence once per message, then folds that fit and test.

Nothing is scored by a model fitted on it. For each fold the ranker, the gate and (with the
semantic extra) the request model, and the form model are fitted on the training messages
only and scored on the held-out ones; the gate learns from out-of-fold ranker, form and
request outputs, like those it sees on new messages.

* k-fold: the labelled messages are split into ``k`` folds, stratified by label.
* leave-one-workflow-out: each workflow's messages are held out in turn (with a share of the
  off-topic messages), so the models never saw any phrasing aimed at the tested workflow.
"""

from __future__ import annotations

import itertools
import math
import random
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from aptix.workflows.loader import load_builtin
from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.matching.associations import Associations
from aptix.workflows.matching.combined import (
    MAX_MATCH_CHARS,
    Candidates,
    WorkflowMatcher,
    decide,
    matched_text,
    with_associations,
)
from aptix.workflows.matching.form import FormModel
from aptix.workflows.matching.fusion import REQUEST_FEATURES, REQUEST_L2, FusionModel
from aptix.workflows.matching.routing import (
    GATE_NONNEGATIVE,
    LEXICAL_GATE,
    LEXICAL_RANK,
    RANK_NONNEGATIVE,
    SEMANTIC_GATE,
    SEMANTIC_RANK,
    BuiltinModel,
    Decision,
    Routing,
)
from aptix.workflows.matching.text import terms
from aptix.workflows.matching.words import WordModel, word_features
from aptix.workflows.registry import WorkflowRegistry
from tests.workflows.matchset import Labelled, TrainingSet, catalog

Matrix = NDArray[np.float64]

#: Candidates the arbiter is shown (the oracle can only pick among them).
ARBITER_CANDIDATES = 5


def eval_catalog() -> list[WorkflowManifest]:
    """The built-in workflows plus the evaluation catalog."""
    return [item.manifest for item in load_builtin()[0]] + list(catalog())


def with_builtin(catalog_: Sequence[WorkflowManifest]) -> list[WorkflowManifest]:
    """The built-in workflows plus ``catalog_``."""
    return [item.manifest for item in load_builtin()[0]] + list(catalog_)


@dataclass
class Scores:
    """Top-1 / top-3 on on-topic messages and rejection of off-topic ones."""

    on_topic: int = 0
    top1: int = 0
    top3: int = 0
    off_topic: int = 0
    rejected: int = 0
    #: Chit-chat among the off-topic messages (the rest are near misses).
    chat: int = 0
    chat_rejected: int = 0
    #: On-topic messages the ranker put first, before the gate decides; of those, accepted.
    ranker_first: int = 0
    gate_passed: int = 0
    misses: list[tuple[str, str | None, list[str]]] = field(default_factory=list)

    def add(self, other: Scores) -> None:
        """Accumulate ``other`` into this one."""
        self.on_topic += other.on_topic
        self.top1 += other.top1
        self.top3 += other.top3
        self.off_topic += other.off_topic
        self.rejected += other.rejected
        self.chat += other.chat
        self.chat_rejected += other.chat_rejected
        self.ranker_first += other.ranker_first
        self.gate_passed += other.gate_passed
        self.misses += other.misses

    def record(self, row: Labelled, ranked: list[str], decision: Decision | None = None) -> None:
        """Count one message with the ids it matched, best first (and the ranker's order)."""
        first = decision.ranked[0][0] if decision is not None and decision.ranked else None
        if decision is not None and row.expected is not None and first == row.expected:
            self.ranker_first += 1
            self.gate_passed += decision.accepted
        if row.expected is None:
            self.off_topic += 1
            self.rejected += not ranked
            if row.chat:
                self.chat += 1
                self.chat_rejected += not ranked
            if ranked:
                self.misses.append((row.message, None, ranked[:3]))
            return
        self.on_topic += 1
        self.top1 += bool(ranked) and ranked[0] == row.expected
        self.top3 += row.expected in ranked[:3]
        if not ranked or ranked[0] != row.expected:
            self.misses.append((row.message, row.expected, ranked[:3]))

    @property
    def ranker_rate(self) -> float:
        """Share of on-topic messages whose ranker puts the labelled workflow first."""
        return self.ranker_first / self.on_topic if self.on_topic else float("nan")

    @property
    def gate_rate(self) -> float:
        """Share of the ranker's right first choices that the gate accepts."""
        return self.gate_passed / self.ranker_first if self.ranker_first else float("nan")

    @property
    def top1_rate(self) -> float:
        """Share of on-topic messages whose first match is the labelled workflow."""
        return self.top1 / self.on_topic if self.on_topic else float("nan")

    @property
    def top3_rate(self) -> float:
        """Share of on-topic messages with the labelled workflow among the first three."""
        return self.top3 / self.on_topic if self.on_topic else float("nan")

    @property
    def rejection_rate(self) -> float:
        """Share of off-topic messages that matched nothing."""
        return self.rejected / self.off_topic if self.off_topic else float("nan")

    @property
    def near_miss_rate(self) -> float:
        """Share of near misses (off-topic, not chit-chat) that matched nothing."""
        near = self.off_topic - self.chat
        return (self.rejected - self.chat_rejected) / near if near else float("nan")

    @property
    def chat_rate(self) -> float:
        """Share of chit-chat messages that matched nothing."""
        return self.chat_rejected / self.chat if self.chat else float("nan")


def without_every(sets: Sequence[TrainingSet], step: int = 3) -> list[TrainingSet]:
    """Each set with every ``step``-th catalog workflow removed; only its requests are kept.

    Those requests now ask for a workflow the catalog does not have: the right answer is no
    match (the built-in workflows all stay).
    """
    out = []
    for item in sets:
        gone = set(sorted(m.workflow_id for m in item.catalog)[::step])
        out.append(
            replace(
                item,
                catalog=tuple(m for m in item.catalog if m.workflow_id not in gone),
                rows=tuple(Labelled(r.message, None) for r in item.rows if r.expected in gone),
            )
        )
    return out


def elsewhere(sets: Sequence[TrainingSet]) -> list[TrainingSet]:
    """Each set's requests served against the *next* set's catalog: they should match nothing.

    A vet practice's request sent to a food plant's catalog asks for a workflow of the
    right shape in a domain the catalog does not cover. Requests for the built-in
    workflows are left out (every catalog has them); the result keeps the requests' set name,
    so that a semantic matcher reads it through the encoder that never saw those requests.
    """
    builtin = {item.manifest.workflow_id for item in load_builtin()[0]}
    out = []
    for k, item in enumerate(sets):
        host = sets[(k + 1) % len(sets)]
        rows = tuple(
            Labelled(r.message, None)
            for r in item.rows
            if r.expected is not None and r.expected not in builtin
        )
        out.append(replace(item, catalog=host.catalog, rows=rows))
    return out


def builtin_only(sets: Sequence[TrainingSet]) -> list[TrainingSet]:
    """Like :func:`elsewhere`, served against the built-in workflows alone (a new install)."""
    return [replace(item, catalog=()) for item in elsewhere(sets)]


def registry_for(
    catalog_: Sequence[WorkflowManifest], matcher: WorkflowMatcher
) -> WorkflowRegistry:
    """A registry serving ``catalog_`` through ``matcher`` (index built)."""
    registry = WorkflowRegistry(catalog_, matcher=matcher)
    registry.match("build the index")
    return registry


@dataclass(frozen=True, eq=False)
class Evidence:
    """Every message's candidates and text, and its embedding when the matcher is semantic."""

    cands: list[Candidates]
    vectors: Matrix | None
    texts: list[str]
    #: Which set each message came from: a fit reads its training messages' word
    #: associations out of their own set (:func:`fit_associations`).
    groups: list[int] = field(default_factory=list)
    #: Lexical only: each message's content terms and each of its candidates' terms.
    terms: list[tuple[list[str], list[frozenset[str]]]] = field(default_factory=list)


def collect(matcher: WorkflowMatcher, rows: Sequence[Labelled]) -> Evidence:
    """Every message's evidence (the matcher's index must be built)."""
    cands = [matcher.candidates(row.message) for row in rows]
    texts = [row.message[:MAX_MATCH_CHARS] for row in rows]
    semantic = matcher.semantic
    groups = [0] * len(rows)
    if semantic is None:
        links = [
            (terms(matched_text(text)), matcher.workflow_terms(found.ids))
            for text, found in zip(texts, cands, strict=True)
        ]
        return Evidence(cands, None, texts, groups, links)
    vectors = np.vstack([semantic.embed_query(text) for text in texts])
    return Evidence(cands, vectors.astype(np.float64), texts, groups)


def set_evidence(
    make: Callable[[TrainingSet], WorkflowMatcher], sets: Sequence[TrainingSet]
) -> tuple[Evidence, list[Labelled], list[range]]:
    """Every set's messages matched against its own catalog (with the built-ins), pooled.

    ``make`` returns a fresh matcher for a set (semantic ones read it through the encoder
    tuned without it); the ranges say which pooled rows came from which set.
    """
    cands: list[Candidates] = []
    vectors: list[Matrix] = []
    texts: list[str] = []
    groups: list[int] = []
    links: list[tuple[list[str], list[frozenset[str]]]] = []
    rows: list[Labelled] = []
    spans: list[range] = []
    for k, item in enumerate(sets):
        matcher = make(item)
        registry_for(with_builtin(item.catalog), matcher)
        found = collect(matcher, item.rows)
        spans.append(range(len(rows), len(rows) + len(item.rows)))
        cands += found.cands
        texts += found.texts
        groups += [k] * len(item.rows)
        links += found.terms
        rows += item.rows
        if found.vectors is not None:
            vectors.append(found.vectors)
    stacked = np.vstack(vectors) if vectors else None
    return Evidence(cands, stacked, texts, groups, links), rows, spans


def fit_request(vectors: Matrix, rows: Sequence[Labelled]) -> FusionModel:
    """The request model (does the message ask for a task?) fitted on these messages."""
    asks = np.asarray([float(r.expected is not None) for r in rows])
    return FusionModel.fit(REQUEST_FEATURES, vectors, asks, l2=REQUEST_L2)


def builtin_ids() -> frozenset[str]:
    """The ids of the built-in workflows."""
    return frozenset(item.manifest.workflow_id for item in load_builtin()[0])


def fit_builtin(vectors: Matrix, rows: Sequence[Labelled]) -> BuiltinModel:
    """The built-in model (does the message ask for a built-in workflow?) on these messages.

    Positives are the requests for a built-in; every other message, requests for the
    catalog's workflows included, is a negative. The request model's form and L2.
    """
    ids = builtin_ids()
    asks = np.asarray([float(r.expected in ids) for r in rows])
    return BuiltinModel(ids, FusionModel.fit(REQUEST_FEATURES, vectors, asks, l2=REQUEST_L2))


def fit_words(texts: Sequence[str], labels: Sequence[bool]) -> WordModel:
    """A :class:`~aptix.workflows.matching.words.WordModel` of ``labels`` on these messages.

    scikit-learn's L2 logistic regression (``C=1``) over the binary word features seen in at
    least two messages, fitted once, untuned.
    """
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    vectoriser = CountVectorizer(
        analyzer=lambda text: sorted(word_features(text)), binary=True, min_df=2
    )
    x = vectoriser.fit_transform(texts)
    fitted = LogisticRegression(C=1.0, max_iter=2000).fit(x, list(labels))
    names = vectoriser.get_feature_names_out()
    weights = {str(f): float(w) for f, w in zip(names, fitted.coef_[0], strict=True)}
    return WordModel(weights, float(fitted.intercept_[0]))


def fit_builtin_words(texts: Sequence[str], rows: Sequence[Labelled]) -> BuiltinModel:
    """The lexical built-in model (:mod:`aptix.workflows.matching.words`) on these messages.

    Labelled as :func:`fit_builtin`.
    """
    ids = builtin_ids()
    return BuiltinModel(ids, words=fit_words(texts, [r.expected in ids for r in rows]))


def fit_request_words(texts: Sequence[str], rows: Sequence[Labelled]) -> WordModel:
    """The lexical request model (does the message ask for a workflow?) on these messages."""
    return fit_words(texts, [r.expected is not None for r in rows])


#: A word association counts only when seen with the right workflow this many times, in at
#: least :data:`ASSOCIATION_CATALOGS` training catalogs: what carries over between domains.
ASSOCIATION_SUPPORT = 2
ASSOCIATION_CATALOGS = 2
#: Pseudo-counts at the base rate that shrink a rare pair's log-odds towards it.
ASSOCIATION_PRIOR = 2.0


@dataclass(frozen=True)
class _Counts:
    """One set's requests: (message term, workflow term) pairs with the right workflow and
    with any candidate, and the number of the latter in all."""

    right: dict[tuple[str, str], int]
    seen: dict[tuple[str, str], int]
    right_total: int
    seen_total: int


_COUNTS: weakref.WeakKeyDictionary[Evidence, dict[tuple[int, ...], _Counts]] = (
    weakref.WeakKeyDictionary()
)


def _pair_counts(ev: Evidence, rows: Sequence[Labelled], idx: tuple[int, ...]) -> _Counts:
    """The pair counts of the requests ``idx`` (one set's), cached per evidence and rows."""
    cache = _COUNTS.setdefault(ev, {})
    if idx in cache:
        return cache[idx]
    right: dict[tuple[str, str], int] = {}
    seen: dict[tuple[str, str], int] = {}
    for i in idx:
        expected, found = rows[i].expected, ev.cands[i]
        if expected is None or expected not in found.ids:
            continue
        message, held = ev.terms[i]
        for m in set(message):
            for w in held[found.ids.index(expected)]:
                right[m, w] = right.get((m, w), 0) + 1
            for candidate in held:
                for w in candidate:
                    seen[m, w] = seen.get((m, w), 0) + 1
    cache[idx] = _Counts(right, seen, sum(right.values()), sum(seen.values()))
    return cache[idx]


def fit_associations(ev: Evidence, rows: Sequence[Labelled], idx: Sequence[int]) -> Associations:
    """The word associations (:mod:`~aptix.workflows.matching.associations`) of ``idx``.

    For each (message term, workflow term) seen with the right workflow at least
    :data:`ASSOCIATION_SUPPORT` times, in :data:`ASSOCIATION_CATALOGS` sets or more: the
    log-odds that a candidate holding the workflow term is the right one, smoothed towards
    the base rate, over the base rate's. Only positive ones are kept.
    """
    by_group: dict[int, list[int]] = {}
    for i in idx:
        by_group.setdefault(ev.groups[i], []).append(i)
    parts = [_pair_counts(ev, rows, tuple(by_group[g])) for g in sorted(by_group)]
    total_right = sum(part.right_total for part in parts)
    if not total_right:
        return Associations({})
    # Only pairs in enough sets can be kept: counted over the sets' keys (a C-level count).
    spread = Counter(itertools.chain.from_iterable(part.right for part in parts))
    base = total_right / sum(part.seen_total for part in parts)
    odds = math.log(base / (1.0 - base))
    prior = ASSOCIATION_PRIOR
    out: dict[str, dict[str, float]] = {}
    for m, w in sorted(pair for pair, sets in spread.items() if sets >= ASSOCIATION_CATALOGS):
        n = sum(part.right.get((m, w), 0) for part in parts)
        if n < ASSOCIATION_SUPPORT:
            continue
        other = sum(part.seen.get((m, w), 0) for part in parts) - n
        value = math.log((n + prior * base) / (other + prior * (1.0 - base))) - odds
        if value > 0:
            out.setdefault(m, {})[w] = value
    return Associations(out)


def fold_associations(
    ev: Evidence, rows: Sequence[Labelled], idx: Sequence[int]
) -> tuple[Evidence, Associations | None]:
    """Lexical: ``idx``'s word associations, and evidence whose training messages read
    associations fitted without their own set (as a new catalog's messages will)."""
    if ev.vectors is not None or not ev.terms:
        return ev, None
    fitted = fit_associations(ev, rows, idx)
    cands = list(ev.cands)
    for group in sorted({ev.groups[i] for i in idx}):
        inner = fit_associations(ev, rows, [i for i in idx if ev.groups[i] != group])
        for i in idx:
            if ev.groups[i] == group:
                cands[i] = with_associations(cands[i], inner.scores(*ev.terms[i]))
    return replace(ev, cands=cands), fitted


def fit_form(ev: Evidence, rows: Sequence[Labelled], idx: Sequence[int]) -> FormModel:
    """The form model fitted on the messages ``idx``."""
    return FormModel.fit([ev.texts[i] for i in idx], [rows[i].expected is not None for i in idx])


def _with(found: Candidates, feature: str, value: float) -> Candidates:
    """``found`` with one gate feature (not ``rank_top`` or ``rank_margin``) set to ``value``."""
    if not len(found.message):
        return found
    names = SEMANTIC_GATE if len(found.message) == len(SEMANTIC_GATE) - 2 else LEXICAL_GATE
    message = found.message.copy()
    message[names.index(feature) - 2] = value
    return replace(found, message=message)


def _fold_evidence(
    found: Candidates,
    i: int,
    ev: Evidence,
    form: FormModel,
    request: FusionModel | None,
    builtin: BuiltinModel | None = None,
    words: WordModel | None = None,
) -> Candidates:
    """Message ``i``'s evidence with the form (request, built-in) outputs of a fold's models."""
    found = _with(found, "form", form.score(ev.texts[i]))
    if ev.vectors is None:
        return _with_words(found, word_features(ev.texts[i]), words, builtin)
    if request is not None:
        found = _with(found, "request_model", float(request.probability(ev.vectors[i][None, :])[0]))
    if builtin is not None and builtin.model is not None and found.ids:
        found = replace(found, builtin=builtin.probability(ev.vectors[i]))
    if builtin is not None and builtin.words is not None and found.ids:
        found = replace(found, builtin_words=builtin.words.probability(ev.texts[i]))
    return found


def _with_words(
    found: Candidates,
    features: frozenset[str],
    words: WordModel | None,
    builtin: BuiltinModel | None,
) -> Candidates:
    """Lexical only: the word models' outputs, from one pass over the message's words."""
    if words is not None:
        found = _with(found, "request_words", words.probability_of(features))
    if builtin is not None and builtin.words is not None and found.ids:
        found = replace(found, builtin_words=builtin.words.probability_of(features))
    return found


def fit_ranker(
    ev: Evidence, rows: Sequence[Labelled], idx: Sequence[int], semantic: bool | None = None
) -> FusionModel:
    """The ranker fitted on the requests ``idx`` (semantic evidence: when ``ev`` has vectors)."""
    if semantic is None:
        semantic = ev.vectors is not None
    xs, ys = [], []
    for i in idx:
        found, row = ev.cands[i], rows[i]
        if row.expected is None or not found.ids:
            continue
        xs.append(found.features)
        ys.append(np.asarray([float(w == row.expected) for w in found.ids]))
    names = SEMANTIC_RANK if semantic else LEXICAL_RANK
    if not xs:
        return FusionModel.fit(names, np.zeros((2, len(names))), np.asarray([0.0, 1.0]))
    return FusionModel.fit(names, np.vstack(xs), np.concatenate(ys), nonnegative=RANK_NONNEGATIVE)


def fit_routing(ev: Evidence, rows: Sequence[Labelled], idx: Sequence[int]) -> Routing:
    """Ranker, gate (and request model) fitted on the messages ``idx`` only."""
    idx = list(idx)
    semantic = ev.vectors is not None
    ev, associations = fold_associations(ev, rows, idx)
    ranker = fit_ranker(ev, rows, idx)
    # The gate learns from out-of-fold ranker (and request) outputs: five inner folds.
    inner = [idx[j::5] for j in range(5)]
    gate_x, gate_y = [], []
    names = SEMANTIC_GATE if semantic else LEXICAL_GATE
    for part in inner:
        held = set(part)
        rest = [i for i in idx if i not in held]
        part_ranker = fit_ranker(ev, rows, rest)
        request = None
        if ev.vectors is not None:
            request = fit_request(ev.vectors[rest], [rows[i] for i in rest])
        form = fit_form(ev, rows, rest)
        words = None
        if ev.vectors is None:
            words = fit_request_words([ev.texts[i] for i in rest], [rows[i] for i in rest])
        model = Routing(
            part_ranker,
            FusionModel(names, (0.0,) * len(names), 0.0, (0.0,) * len(names), (1.0,) * len(names)),
        )
        for i in part:
            found = ev.cands[i]
            if not found.ids:
                continue
            found = _fold_evidence(found, i, ev, form, request, words=words)
            decision = decide(model, found)
            top = decision.ranked[0][1]
            second = decision.ranked[1][1] if len(decision.ranked) > 1 else 0.0
            gate_x.append(np.concatenate([[top, top - second], found.message]))
            gate_y.append(float(rows[i].expected is not None))
    gate = FusionModel.fit(
        names, np.vstack(gate_x), np.asarray(gate_y), nonnegative=GATE_NONNEGATIVE
    )
    texts, labelled = [ev.texts[i] for i in idx], [rows[i] for i in idx]
    form = fit_form(ev, rows, idx)
    if ev.vectors is not None:
        request_model = fit_request(ev.vectors[idx], labelled)
        builtin = replace(
            fit_builtin(ev.vectors[idx], labelled),
            words=fit_builtin_words(texts, labelled).words,
        )
        return Routing(ranker, gate, request_model, form, builtin)
    builtin = fit_builtin_words(texts, labelled)
    words = fit_request_words(texts, labelled)
    return Routing(ranker, gate, None, form, builtin, words, associations)


def _read_by(model: Routing, ev: Evidence, i: int) -> Candidates:
    """Message ``i``'s candidates with ``model``'s word associations (lexical) in their rows."""
    found = ev.cands[i]
    if model.associations is not None and ev.terms:
        found = with_associations(found, model.associations.scores(*ev.terms[i]))
    return found


def decisions(model: Routing, ev: Evidence, idx: Sequence[int]) -> dict[int, Decision]:
    """The decisions of ``model`` on the messages ``idx``."""
    out = {}
    for i in idx:
        found = _read_by(model, ev, i)
        if model.form is not None:
            found = _fold_evidence(
                found, i, ev, model.form, model.request, model.builtin, model.words
            )
        out[i] = decide(model, found)
    return out


def ranker_firsts(
    ranker: FusionModel, ev: Evidence, rows: Sequence[Labelled], idx: Sequence[int]
) -> int:
    """How many requests among ``idx`` have their workflow as ``ranker``'s own first choice.

    The ranker alone, ties broken by id as :func:`~aptix.workflows.matching.combined.decide`
    breaks them, before its rules for stated patterns and built-ins.
    """
    right = 0
    for i in idx:
        found, expected = ev.cands[i], rows[i].expected
        if expected is None or not found.ids:
            continue
        p = ranker.probability(found.features).tolist()
        first = min(range(len(p)), key=lambda j: (-p[j], found.ids[j]))
        right += found.ids[first] == expected
    return right


def ranker_bound(
    models: Sequence[Routing], ev: Evidence, rows: Sequence[Labelled], spans: Sequence[range]
) -> tuple[int, int]:
    """Right first choices of each set's held-out ranker, and of a ranker fitted on the set.

    ``models[k]`` was fitted without set ``k``. The second count reads the same evidence
    through a ranker fitted on set ``k``'s own requests and scored on them, so it is
    optimistic: about as many as reweighting the evidence (per catalog, per writing style,
    per kind of request) could put first. Only new evidence goes much past it.
    """
    held_out = own = 0
    for model, span in zip(models, spans, strict=True):
        cands = list(ev.cands)
        for i in span:
            cands[i] = _read_by(model, ev, i)
        seen = replace(ev, cands=cands)
        held_out += ranker_firsts(model.ranker, seen, rows, span)
        own += ranker_firsts(fit_ranker(seen, rows, span), seen, rows, span)
    return held_out, own


def score(found: dict[int, Decision], rows: Sequence[Labelled], arbiter: str = "off") -> Scores:
    """Scores of the decisions; ``arbiter`` ``ambiguous``/``always`` adds an oracle arbiter.

    The oracle answers from the labels, choosing only among the first
    :data:`ARBITER_CANDIDATES` candidates (or ``none``): the arbiter's upper bound.
    """
    out = Scores()
    for i, decision in found.items():
        row = rows[i]
        ranked = [w for w, _ in decision.matches(10)]
        asked = arbiter == "always" or (arbiter == "ambiguous" and decision.unsure)
        if asked and decision.ranked:
            shown = [w for w, _ in decision.ranked[:ARBITER_CANDIDATES]]
            ranked = [row.expected] if row.expected in shown else []
        out.record(row, ranked, decision)
    return out


@dataclass(frozen=True)
class Fold:
    """Indices of the training and the held-out messages of one fold."""

    name: str
    train: list[int]
    test: list[int]


def kfold(rows: Sequence[Labelled], k: int = 5, seed: int = 13) -> list[Fold]:
    """``k`` folds stratified by label (each workflow's messages spread over the folds)."""
    rng = random.Random(seed)
    by_label: dict[str | None, list[int]] = {}
    for i, row in enumerate(rows):
        by_label.setdefault(row.expected, []).append(i)
    assignment = [0] * len(rows)
    offset = 0
    for label in sorted(by_label, key=lambda x: x or ""):
        indices = by_label[label]
        rng.shuffle(indices)
        for j, i in enumerate(indices):
            assignment[i] = (j + offset) % k
        offset += len(indices)
    return [
        Fold(
            f"fold {f + 1}/{k}",
            [i for i in range(len(rows)) if assignment[i] != f],
            [i for i in range(len(rows)) if assignment[i] == f],
        )
        for f in range(k)
    ]


def leave_one_workflow_out(rows: Sequence[Labelled]) -> list[Fold]:
    """One fold per workflow: its messages (and a share of off-topic ones) held out."""
    workflows = sorted({row.expected for row in rows if row.expected is not None})
    off = [i for i, row in enumerate(rows) if row.expected is None]
    folds = []
    for n, wid in enumerate(workflows):
        held_off = set(off[n :: len(workflows)])
        test = [i for i, row in enumerate(rows) if row.expected == wid or i in held_off]
        held = set(test)
        folds.append(Fold(wid, [i for i in range(len(rows)) if i not in held], test))
    return folds


def run_folds(
    folds: Sequence[Fold],
    ev: Evidence,
    rows: Sequence[Labelled],
    always_train: Sequence[int] = (),
    arbiter: str = "off",
) -> Scores:
    """Fit on each fold's training part (plus ``always_train``), score its held-out part."""
    total = Scores()
    for fold in folds:
        model = fit_routing(ev, rows, [*always_train, *fold.train])
        total.add(score(decisions(model, ev, fold.test), rows, arbiter))
    return total


def unique(rows: Sequence[Labelled]) -> list[Labelled]:
    """``rows`` without exact duplicates (case and spacing aside), first kept."""
    seen: set[str] = set()
    out = []
    for row in rows:
        key = " ".join(row.message.casefold().split())
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


def placeholder(semantic: bool) -> Routing:
    """Zero-weight models of the right shape: evidence can be collected before any fit."""

    def zero(names: Sequence[str]) -> FusionModel:
        n = len(names)
        return FusionModel(tuple(names), (0.0,) * n, 0.0, (0.0,) * n, (1.0,) * n)

    if not semantic:
        return Routing(zero(LEXICAL_RANK), zero(LEXICAL_GATE))
    return Routing(zero(SEMANTIC_RANK), zero(SEMANTIC_GATE), None)
