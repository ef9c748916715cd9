"""A message that states a workflow's intent pattern outright is accepted for that workflow."""

from __future__ import annotations

from aptix.workflows.loader import load_builtin
from aptix.workflows.matching.combined import WorkflowMatcher
from aptix.workflows.matching.stated import StatedPatterns
from aptix.workflows.registry import WorkflowRegistry
from tests.workflows.conftest import make_manifest

MODES = make_manifest(
    "choose_a_mode", userIntentPatterns=["which mode should I use", "switch to another mode"]
)
REPORT = make_manifest("sales_report", userIntentPatterns=["create a sales report", "hello"])
OTHER = make_manifest("other_report", userIntentPatterns=["create a sales report now"])
TWIN = make_manifest("twin_mode", userIntentPatterns=["switch to another mode"])


def stated(*manifests: object) -> StatedPatterns:
    """An index over ``manifests``."""
    index = StatedPatterns()
    index.build(manifests)  # type: ignore[arg-type]
    return index


def test_a_pattern_stated_with_a_few_words_of_politeness_names_its_workflow() -> None:
    index = stated(MODES, REPORT)
    assert index.find("Which mode should I use?") == "choose_a_mode"
    assert index.find("could you please switch to another mode") == "choose_a_mode"
    assert index.find("create a sales report") == "sales_report"


def test_the_longest_stated_pattern_wins() -> None:
    index = stated(REPORT, OTHER)
    assert index.find("please create a sales report now") == "other_report"
    assert index.find("please create a sales report") == "sales_report"


def test_negated_long_shared_and_one_word_patterns_are_not_stated() -> None:
    index = stated(MODES, REPORT)
    assert index.find("don't switch to another mode") is None
    # Four words beyond the pattern: a sentence about it, not the request itself.
    assert index.find("yesterday my colleague asked which mode should I use") is None
    assert index.find("hello") is None
    assert index.find("") is None
    # Two workflows share the pattern: the words alone do not decide.
    assert stated(MODES, TWIN).find("switch to another mode") is None
    assert stated(MODES, TWIN).find("which mode should I use") == "choose_a_mode"


def test_a_stated_builtin_pattern_is_matched_whatever_the_gate_says() -> None:
    builtin = [item.manifest for item in load_builtin()[0]]
    registry = WorkflowRegistry(builtin, matcher=WorkflowMatcher())
    for message, expected in (
        ("which mode should I use?", "choose_mode"),
        ("please introduce yourself", "greet_user"),
        ("switch to another mode", "choose_mode"),
    ):
        [first, *_] = registry.match(message)
        assert first.workflow_id == expected
        assert first.match_score >= 0.9
    negated = registry.match("I don't want to switch to another mode")
    assert negated == [] or negated[0].match_score < 0.9
