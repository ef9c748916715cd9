"""The labelled matching set is as large and as varied as the evaluation needs."""

from __future__ import annotations

from collections import Counter

from aptix.workflows.loader import load_builtin
from tests.workflows.matchset import catalog, labelled


def test_the_set_is_large_and_labelled_against_served_workflows() -> None:
    served = {m.workflow_id for m in catalog()} | {
        i.manifest.workflow_id for i in load_builtin()[0]
    }
    rows = labelled()
    per_workflow = Counter(row.expected for row in rows if row.expected is not None)
    assert len(rows) >= 400
    assert sum(row.expected is None for row in rows) >= 80
    assert len(per_workflow) >= 15
    assert set(per_workflow) <= served
    assert len({row.message.casefold() for row in rows}) == len(rows)


def test_the_eval_catalog_is_not_built_in() -> None:
    builtin = {i.manifest.workflow_id for i in load_builtin()[0]}
    assert not builtin & {m.workflow_id for m in catalog()}
