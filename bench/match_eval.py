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

from aptix.workflows.loader import load_builtin
from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.matching.combined import MATCH_THRESHOLD, Candidates, WorkflowMatcher
from aptix.workflows.matching.fusion import FUSED_FEATURES, FusionModel
from aptix.workflows.registry import WorkflowRegistry
from tests.workflows.matchset import Labelled, catalog

__all__ = [
    "Fold",
    "Scores",
    "collect",
    "eval_catalog",
    "fit_model",
    "kfold",
    "leave_one_workflow_out",
    "run_folds",
    "score",
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
) -> Scores:
    """Fit on each fold's training part, score on its held-out part; the summed scores."""
    total = Scores()
    for fold in folds:
        model = fit_model([cands[i] for i in fold.train], [rows[i] for i in fold.train], features)
        result = score(model, [cands[i] for i in fold.test], [rows[i] for i in fold.test])
        if on_fold is not None:
            on_fold(fold, result)
        total.add(result)
    return total
