"""The word associations of the lexical ranker: scoring, storage, the index's cache, the fit."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.matching import evidence
from aptix.workflows.matching.associations import Associations
from aptix.workflows.matching.combined import WorkflowMatcher
from aptix.workflows.matching.routing import LEXICAL_RANK, SEMANTIC_RANK, default_routing
from aptix.workflows.matching.text import terms
from bench.match_eval import Evidence, collect, fit_associations, fold_associations, registry_for
from tests.workflows.matchset import Labelled, training_sets

ASSOC = LEXICAL_RANK.index("assoc")


def _workflow(wid: str, title: str, pattern: str) -> WorkflowManifest:
    return WorkflowManifest(
        workflow_id=wid,
        title=title,
        description=f"{title}.",
        user_intent_patterns=(pattern,),
        instruction_text="1. Ask for the details.\n2. Do it.",
        completion_criteria=("Done.",),
        version="1.0.0",
    )


def _matcher(routing: object, manifests: list[WorkflowManifest]) -> WorkflowMatcher:
    matcher = WorkflowMatcher(model=routing)  # type: ignore[arg-type]
    registry_for(manifests, matcher)
    return matcher


def test_scores_sum_the_best_association_of_each_message_term() -> None:
    model = Associations({"slip": {"injuri": 1.9, "report": 1.0}, "floor": {"clean": 0.5}})
    held = [frozenset({"injuri", "report"}), frozenset({"report", "clean"}), frozenset()]
    # A repeated message term counts once; a term without a row adds nothing.
    got = model.scores(["slip", "floor", "slip", "lobbi"], held)
    assert got.tolist() == [1.9, 1.5, 0.0]
    assert Associations({}).scores(["slip"], held).tolist() == [0.0, 0.0, 0.0]


def test_stored_and_read_back_unchanged_and_byte_stable() -> None:
    model = Associations({"b": {"z": 0.123456, "a": 2.0}, "a": {"q": 1.0}})
    text = json.dumps(model.to_json())
    assert text == '{"a": {"q": 1.0}, "b": {"a": 2.0, "z": 0.1235}}'
    assert Associations.from_json(json.loads(text)).to_json() == model.to_json()


def test_shipped_only_for_the_lexical_configuration() -> None:
    lexical = default_routing(False).associations
    assert lexical is not None
    assert lexical.rows
    # What ships is what carried over between catalogs: every kept pair is positive.
    assert all(a > 0 for row in lexical.rows.values() for a in row.values())
    assert default_routing(True).associations is None
    assert "assoc" not in SEMANTIC_RANK


@pytest.mark.parametrize("cached_bytes", [evidence.ASSOCIATION_CACHE_BYTES, 2_000])
def test_index_reads_the_same_scores_as_the_reference(
    monkeypatch: pytest.MonkeyPatch, cached_bytes: int
) -> None:
    # The matcher reads each term's best association per workflow from a cache; with a
    # tiny cache its terms leave mid-message, and it must still agree with the reference.
    monkeypatch.setattr(evidence._TERMS, "limit", cached_bytes)
    routing = default_routing(False)
    assert routing.associations is not None
    item = training_sets()[1]
    matcher = _matcher(routing, list(item.catalog))
    for row in item.rows[:120]:
        found = matcher.candidates(row.message)
        reference = routing.associations.scores(
            terms(row.message), matcher.workflow_terms(found.ids)
        )
        assert np.array_equal(found.features[:, ASSOC], reference), row.message


def test_an_association_tells_siblings_apart_without_a_shared_action_word() -> None:
    catalog = [
        _workflow("booking_cancel", "Cancel a booking", "cancel a booking"),
        _workflow("booking_move", "Move a booking", "move a booking"),
    ]
    message = "two room bookings clash on friday"
    shipped = default_routing(False)
    found = _matcher(shipped, catalog).candidates(message)
    by_id = dict(zip(found.ids, found.features[:, ASSOC], strict=True))
    assert by_id["booking_move"] > by_id["booking_cancel"]
    with_margin = _matcher(shipped, catalog).decide(message).ranked
    without = _matcher(replace(shipped, associations=None), catalog)
    assert not without.candidates(message).features[:, ASSOC].any()
    plain = without.decide(message).ranked
    assert with_margin[0][0] == "booking_move"
    # The association widens the ranker's margin between the two.
    assert with_margin[0][1] - with_margin[1][1] > plain[0][1] - plain[1][1]


def _toy_evidence() -> tuple[Evidence, list[Labelled]]:
    """Three sets of one catalog: "clash" asks for moving in sets 0 and 1 only."""
    catalog = [
        _workflow("booking_cancel", "Cancel a booking", "cancel a booking"),
        _workflow("booking_move", "Move a booking", "move a booking"),
    ]
    rows = [
        Labelled("two bookings clash", "booking_move"),
        Labelled("the bookings clash again", "booking_move"),
        Labelled("my bookings clash today", "booking_move"),
        Labelled("bookings clash on monday", "booking_move"),
        Labelled("a booking I made in error", "booking_cancel"),
        Labelled("the bookings were made in error", "booking_cancel"),
    ]
    matcher = _matcher(replace(default_routing(False), associations=None), catalog)
    found = collect(matcher, rows)
    return replace(found, groups=[0, 0, 1, 1, 2, 2]), rows


def test_a_pair_ships_only_when_two_sets_show_it() -> None:
    ev, rows = _toy_evidence()
    both = fit_associations(ev, rows, range(6))
    assert both.rows["clash"]["move"] > 0
    # Seen in one set only (twice): one catalog's words, not kept.
    assert "clash" not in fit_associations(ev, rows, [0, 1, 4, 5]).rows
    # "error" -> "cancel" appears in one set only too.
    assert "error" not in both.rows


def test_training_messages_read_associations_fitted_without_their_own_set() -> None:
    ev, rows = _toy_evidence()
    fold, fitted = fold_associations(ev, rows, range(6))
    assert fitted is not None
    assert "clash" in fitted.rows
    # Set 0's messages read associations of sets 1 and 2, where "clash" is in one set only:
    # nothing, as for a catalog nobody fitted on.
    for i in (0, 1, 2, 3):
        assert not fold.cands[i].features[:, ASSOC].any()
