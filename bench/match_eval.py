"""The matching evaluation protocol: features once per message, then folds that fit and test.

Nothing is scored on data it was fitted on. For each fold the fusion model (the only fitted
part: weights and calibration; the threshold is the fixed probability ``MATCH_THRESHOLD``) is
fitted on the training messages and scored on the held-out ones.

* k-fold: the labelled messages are split into ``k`` folds, stratified by label.
* leave-one-workflow-out: each workflow's messages are held out in turn (with a share of the
  off-topic messages), so the model never saw any phrasing aimed at the tested workflow.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from aptix.workflows.loader import load_builtin
from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.matching.combined import (
    MATCH_THRESHOLD,
    MAX_MATCH_CHARS,
    Candidates,
    WorkflowMatcher,
)
from aptix.workflows.matching.fusion import (
    FUSED_FEATURES,
    REQUEST_FEATURES,
    REQUEST_L2,
    FusionModel,
)
from aptix.workflows.registry import WorkflowRegistry
from tests.workflows.matchset import Labelled, catalog

Matrix = NDArray[np.float64]

__all__ = [
    "Fold",
    "Scores",
    "collect",
    "embeddings",
    "eval_catalog",
    "fit_model",
    "fit_request",
    "kfold",
    "leave_one_workflow_out",
    "run_folds",
    "score",
    "with_request",
]


def eval_catalog() -> list[WorkflowManifest]:
    """The built-in workflows plus the evaluation catalog."""
    return [item.manifest for item in load_builtin()[0]] + list(catalog())


@dataclass
class Scores:
    """Top-1 / top-3 on on-topic messages and rejection of off-topic ones."""

    on_topic: int = 0
    top1: int = 0
    top3: int = 0
    off_topic: int = 0
    rejected: int = 0
    misses: list[tuple[str, str | None, list[str]]] = field(default_factory=list)

    def add(self, other: Scores) -> None:
        """Accumulate ``other`` into this one."""
        self.on_topic += other.on_topic
        self.top1 += other.top1
        self.top3 += other.top3
        self.off_topic += other.off_topic
        self.rejected += other.rejected
        self.misses += other.misses

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


def registry_for(
    catalog_: Sequence[WorkflowManifest], matcher: WorkflowMatcher
) -> WorkflowRegistry:
    """A registry serving ``catalog_`` through ``matcher`` (index built)."""
    registry = WorkflowRegistry(catalog_, matcher=matcher)
    registry.match("build the index")
    return registry


def collect(matcher: WorkflowMatcher, rows: Sequence[Labelled]) -> list[Candidates]:
    """Every message's candidates and features (the matcher's index must be built)."""
    return [matcher.candidates(row.message) for row in rows]


def embeddings(matcher: WorkflowMatcher, rows: Sequence[Labelled]) -> Matrix:
    """Every message's embedding (the matcher must have a semantic part)."""
    if matcher.semantic is None:
        raise ValueError("embeddings need a semantic matcher")
    semantic = matcher.semantic
    return np.vstack([semantic.embed_query(r.message[:MAX_MATCH_CHARS]) for r in rows]).astype(
        np.float64
    )


def fit_request(vectors: Matrix, rows: Sequence[Labelled]) -> FusionModel:
    """The request model (does the message ask for a task?) fitted on these messages."""
    asks = np.asarray([float(r.expected is not None) for r in rows])
    return FusionModel.fit(REQUEST_FEATURES, vectors, asks, l2=REQUEST_L2)


def with_request(
    cands: Sequence[Candidates],
    vectors: Matrix,
    rows: Sequence[Labelled],
    train: Sequence[int],
    test: Sequence[int],
    inner: int = 5,
) -> list[Candidates]:
    """``cands`` with the request column from models that never saw the message scored.

    Test messages get the model fitted on all of ``train``; each training message gets the
    model fitted on the other inner folds of ``train``, as the fusion model must learn from
    request probabilities like those it will see on unseen messages.
    """
    column = FUSED_FEATURES.index("request")
    request = np.zeros(len(cands))
    parts = [list(train[j::inner]) for j in range(inner)]
    for part in parts:
        held = set(part)
        rest = [i for i in train if i not in held]
        model = fit_request(vectors[rest], [rows[i] for i in rest])
        request[part] = model.probability(vectors[part])
    if test:
        model = fit_request(vectors[list(train)], [rows[i] for i in train])
        request[list(test)] = model.probability(vectors[list(test)])
    out = list(cands)
    for i in (*train, *test):
        features = cands[i].features.copy()
        if len(features):
            features[:, column] = request[i]
        out[i] = Candidates(cands[i].ids, features)
    return out


def _columns(features: Sequence[str]) -> list[int]:
    return [FUSED_FEATURES.index(f) for f in features]


def fit_model(
    cands: Sequence[Candidates], rows: Sequence[Labelled], features: Sequence[str]
) -> FusionModel:
    """Fit the fusion model on the given messages' candidates."""
    cols = _columns(features)
    xs, ys = [], []
    for found, row in zip(cands, rows, strict=True):
        if not found.ids:
            continue
        xs.append(found.features[:, cols])
        ys.append(np.asarray([float(w == row.expected) for w in found.ids]))
    return FusionModel.fit(features, np.vstack(xs), np.concatenate(ys))


def score(model: FusionModel, cands: Sequence[Candidates], rows: Sequence[Labelled]) -> Scores:
    """Score ``model`` on the given messages' candidates."""
    cols = _columns(model.features)
    out = Scores()
    for found, row in zip(cands, rows, strict=True):
        ranked: list[str] = []
        if found.ids:
            p = model.probability(found.features[:, cols])
            order = sorted(range(len(p)), key=lambda i: (-p[i], found.ids[i]))
            ranked = [found.ids[i] for i in order if p[i] >= MATCH_THRESHOLD]
        if row.expected is None:
            out.off_topic += 1
            out.rejected += not ranked
            if ranked:
                out.misses.append((row.message, None, ranked[:3]))
            continue
        out.on_topic += 1
        out.top1 += bool(ranked) and ranked[0] == row.expected
        out.top3 += row.expected in ranked[:3]
        if not ranked or ranked[0] != row.expected:
            out.misses.append((row.message, row.expected, ranked[:3]))
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
    cands: Sequence[Candidates],
    rows: Sequence[Labelled],
    features: Sequence[str],
    on_fold: Callable[[Fold, Scores], None] | None = None,
    vectors: Matrix | None = None,
) -> Scores:
    """Fit on each fold's training part, score on its held-out part; the summed scores.

    With the ``request`` feature, ``vectors`` (the message embeddings) are needed: the request
    model is refitted inside every fold, so nothing is scored by a model that saw it.
    """
    if "request" in features and vectors is None:
        raise ValueError("the request feature needs the message embeddings")
    total = Scores()
    for fold in folds:
        if vectors is not None and "request" in features:
            cands = with_request(cands, vectors, rows, fold.train, fold.test)
        model = fit_model([cands[i] for i in fold.train], [rows[i] for i in fold.train], features)
        result = score(model, [cands[i] for i in fold.test], [rows[i] for i in fold.test])
        if on_fold is not None:
            on_fold(fold, result)
        total.add(result)
    return total
