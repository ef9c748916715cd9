"""bench.encoder_probe's scoring: counts of the encoder's first choices and its AUC."""

from __future__ import annotations

import re

import numpy as np
from numpy.typing import NDArray

from aptix.workflows.manifest import WorkflowManifest
from bench.encoder_probe import score
from tests.workflows.matchset import Labelled, TrainingSet


def _manifest(workflow_id: str, title: str, patterns: tuple[str, ...]) -> WorkflowManifest:
    return WorkflowManifest(
        workflow_id=workflow_id,
        title=title,
        description=f"Use this to {title.lower()}.",
        user_intent_patterns=patterns,
        instruction_text="1. Do it.",
        completion_criteria=("Done.",),
        version="1.0.0",
    )


class Words:
    """A bag-of-words encoder: one dimension per word, first seen first."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def __call__(self, texts: list[str]) -> NDArray[np.float32]:
        rows = np.zeros((len(texts), 4096), dtype=np.float32)
        for row, text in zip(rows, texts, strict=True):
            for word in re.findall(r"[a-z]+", text.lower()):
                row[self.index.setdefault(word, len(self.index))] += 1.0
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        out: NDArray[np.float32] = rows / np.where(norms == 0, 1.0, norms)
        return out


CATALOG = (
    _manifest("invoice_send", "Send an invoice", ("send the invoice", "bill the customer")),
    _manifest("payroll_run", "Run payroll", ("run payroll", "pay the staff salaries")),
)


def test_requests_are_counted_by_the_workflow_their_closest_text_belongs_to() -> None:
    rows = (
        Labelled("please bill the customer", "invoice_send"),
        Labelled("pay the staff salaries today", "payroll_run"),
        # Its words are payroll's, so the encoder's first choice is wrong.
        Labelled("run payroll for the invoice", "invoice_send"),
        Labelled("zebra quokka", None, chat=True),
    )
    (only,), auc = score(Words(), [TrainingSet("toy", CATALOG, rows)])
    assert (only.name, only.requests, only.first) == ("toy", 3, 2)
    assert only.top3 == 3
    # Every request shares words with some text; the chit-chat shares none with any.
    assert auc == 1.0


def test_auc_is_a_half_when_requests_and_nothing_score_alike() -> None:
    rows = (
        Labelled("send the invoice", "invoice_send"),
        Labelled("send the invoice", None),
    )
    _, auc = score(Words(), [TrainingSet("toy", CATALOG, rows)])
    assert auc == 0.5
