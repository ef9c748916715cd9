"""The labelled matching set is as large and as varied as the evaluation needs."""

from __future__ import annotations

from collections import Counter

import yaml

from aptix.workflows.loader import load_builtin
from tests.workflows.matchset import (
    HERE,
    REQUEST_KINDS,
    candidate_sets,
    catalog,
    chitchat,
    fresh,
    holdout2,
    holdout3,
    holdout4,
    labelled,
    nearmiss,
    request_kinds,
    terse_catalog,
    terse_labelled,
    training_sets,
)


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


def test_the_held_out_sets_are_as_large_as_issue_22_asks() -> None:
    near = nearmiss() + tuple(r for r in terse_labelled() if r.expected is None)
    assert len(near) >= 100
    assert len(chitchat()) >= 30
    assert len(fresh()) >= 90
    terse_ids = {m.workflow_id for m in terse_catalog()}
    terse_requests = [r for r in terse_labelled() if r.expected is not None]
    assert {r.expected for r in terse_requests} == terse_ids
    assert all(len(m.user_intent_patterns) <= 3 for m in terse_catalog())


def test_no_message_is_in_two_sets() -> None:
    held = fresh() + terse_labelled() + nearmiss() + chitchat()
    held += tuple(row for t in holdout2() + holdout4() for row in t.rows) + holdout3()
    trained = tuple(row for t in training_sets() + candidate_sets() for row in t.rows)
    keys = [" ".join(r.message.casefold().split()) for r in trained + held]
    assert len(keys) == len(set(keys))
    served = {m.workflow_id for m in catalog()} | {
        i.manifest.workflow_id for i in load_builtin()[0]
    }
    assert {r.expected for r in fresh()} - {None} <= served


def test_catalogs_added_after_the_held_out_sets_take_nothing_from_them() -> None:
    # A training message equal to a held-out one would silently drop it from its held-out
    # set (duplicates are scored once), so later figures would not compare with earlier.
    files = [HERE / name for name in ("fresh.yaml", "terse_messages.yaml", "nearmiss.yaml")]
    files += [p for p in HERE.glob("holdout*/**/*.yaml") if p.name != "catalog.yaml"]
    held = set()
    for path in files:
        for messages in yaml.safe_load(path.read_text(encoding="utf-8")).values():
            held |= {" ".join(m.casefold().split()) for m in messages}
    assert len(held) > 1500
    later = [t for t in training_sets() + candidate_sets() if t.name in ("j", "k", "l")]
    assert len(later) == 3
    shared = [
        r.message for t in later for r in t.rows if " ".join(r.message.casefold().split()) in held
    ]
    assert shared == []


def test_every_training_catalog_writes_each_workflow_eight_kinds_of_request() -> None:
    counts = Counter(request_kinds().values())
    workflows = sum(len(t.catalog) for t in training_sets()[1:] + candidate_sets())
    extra = Counter[str]()
    for path in HERE.glob("*/*/situations.yaml"):
        name = path.parent.name
        own = [m.workflow_id for t in candidate_sets() if t.name == name for m in t.catalog]
        own += [m.workflow_id for t in training_sets() if t.name == name for m in t.catalog]
        groups = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert list(groups) == own, path
        assert all(set(kinds) <= set(REQUEST_KINDS) for kinds in groups.values())
        extra.update(kind for kinds in groups.values() for kind in kinds for _ in kinds[kind])
    assert set(counts) == set(REQUEST_KINDS)
    assert extra["indirect"] >= 90
    assert extra["problem"] >= 90
    # Exact duplicates across catalogs are kept once, so a kind may be a message or two short.
    assert all(workflows - 3 <= n - extra[kind] <= workflows for kind, n in counts.items()), counts


def test_every_set_is_labelled_against_its_own_catalog() -> None:
    builtin = {i.manifest.workflow_id for i in load_builtin()[0]}
    for item in training_sets() + candidate_sets() + holdout2() + holdout4():
        ids = {m.workflow_id for m in item.catalog}
        assert len(ids) == len(item.catalog), item.name
        assert not ids & builtin, item.name
        expected = {r.expected for r in item.rows} - {None}
        assert expected <= ids | builtin, item.name
        assert sum(r.expected is None for r in item.rows) >= 30, item.name
    # Ten training catalogs besides the development one, each with its own near misses.
    assert len(training_sets()) == 10
    assert [t.name for t in candidate_sets()] == ["l"]
    assert all(sum(r.chat for r in t.rows) >= 20 for t in training_sets()[1:])


def test_round_four_holds_two_catalogs_in_the_training_catalogs_shape() -> None:
    builtin = {i.manifest.workflow_id for i in load_builtin()[0]}
    styles = []
    for item in holdout4():
        requests = [r for r in item.rows if r.expected is not None]
        # Eight requests for each of its 30 workflows, and eight for each built-in but the
        # hidden diagnostics one.
        assert len(item.catalog) == 30
        assert len([r for r in requests if r.expected not in builtin]) == 240
        assert len({r.expected for r in requests} & builtin) == 5
        assert sum(r.expected is None and not r.chat for r in item.rows) >= 150
        assert sum(r.chat for r in item.rows) >= 30
        styles.append(max(len(m.user_intent_patterns) for m in item.catalog))
    assert styles == [4, 3]  # h is rich, i terse
