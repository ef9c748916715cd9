"""The model as arbiter (APTIX_MATCH_ARBITER): every path against the scripted server.

The ranker's and the gate's decision is fixed by a stub matcher, so each test controls
whether the decision is sure or not; the model is the real OpenAI client talking to
:class:`~aptix.testing.server.ScriptedOpenAIServer`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from aptix.llm.openai_client import OpenAiLlmClient
from aptix.reasoner.arbiter_model import LlmArbiterModel
from aptix.testing import call, reply
from aptix.testing.server import Delay, Fail, ScriptedOpenAIServer
from aptix.workflows.loader import load_builtin
from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.matching.arbiter import TOOL_NAME, MatchArbiter
from aptix.workflows.matching.combined import WorkflowMatcher
from aptix.workflows.matching.routing import LEXICAL_GATE, WEAK_CHAR, Decision, default_routing
from aptix.workflows.matching.semantic import SemanticMatcher, load_embedder
from aptix.workflows.registry import WorkflowRegistry
from tests.workflows.conftest import make_manifest

RECORDED = Path(__file__).parent / "arbiter_answers.json"


class FixedMatcher(WorkflowMatcher):
    """A matcher whose decision the test sets."""

    decision = Decision((), 0.0)

    def decide(self, message: str) -> Decision:
        return self.decision

    def why(self, message: str, workflow_id: str) -> str:
        return "fixed"


SURE = Decision((("create_report", 0.95), ("summarise_numbers", 0.05)), 0.97)
UNSURE = Decision(
    (
        ("create_report", 0.5),
        ("secret_audit", 0.48),
        ("old_export", 0.47),
        ("summarise_numbers", 0.45),
        ("other_orgs", 0.4),
    ),
    0.6,
)


def _catalog() -> list[WorkflowManifest]:
    return [
        make_manifest("create_report"),
        make_manifest("summarise_numbers"),
        make_manifest("secret_audit", visibility="hidden"),
        make_manifest("old_export", status="disabled"),
    ]


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as running:
        yield running


def _registry(
    server: ScriptedOpenAIServer, decision: Decision, mode: str = "ambiguous", timeout: float = 5
) -> WorkflowRegistry:
    matcher = FixedMatcher()
    matcher.decision = decision
    registry = WorkflowRegistry(_catalog(), matcher=matcher, matcher_factory=FixedMatcher)
    registry.publish(make_manifest("other_orgs"), org="acme")
    client = OpenAiLlmClient(base_url=server.base_url, api_key="k", model="m", max_retries=0)
    registry.arbiter = MatchArbiter(LlmArbiterModel(client), mode, timeout=timeout)
    return registry


def _choose(workflow_id: str) -> Any:
    return reply(None, call(TOOL_NAME, {"workflowId": workflow_id}))


def _offered(server: ScriptedOpenAIServer, index: int = -1) -> list[str]:
    tool = server.requests[index]["tools"][0]["function"]
    enum: list[str] = tool["parameters"]["properties"]["workflowId"]["enum"]
    return enum


async def test_a_sure_decision_costs_no_model_call(server: ScriptedOpenAIServer) -> None:
    registry = _registry(server, SURE)
    found = await registry.match_async("write the monthly report", org="beta")
    assert [m.workflow_id for m in found] == ["create_report"]
    assert server.requests == []


async def test_an_unsure_decision_is_put_to_the_model_which_chooses(
    server: ScriptedOpenAIServer,
) -> None:
    server.add(_choose("summarise_numbers"))
    registry = _registry(server, UNSURE)
    found = await registry.match_async("the numbers thing", org="beta")
    assert found[0].workflow_id == "summarise_numbers"
    assert found[0].why == "chosen by the model among the top candidates"
    assert _offered(server) == ["create_report", "summarise_numbers", "none"]


async def test_none_from_the_model_matches_nothing(server: ScriptedOpenAIServer) -> None:
    server.add(_choose("none"))
    found = await _registry(server, UNSURE).match_async("tell me about reports", org="beta")
    assert found == []


async def test_hidden_disabled_and_other_org_workflows_never_reach_the_prompt(
    server: ScriptedOpenAIServer,
) -> None:
    server.add(_choose("create_report"))
    await _registry(server, UNSURE, mode="always").match_async("reports", org="beta")
    body = json.dumps(server.requests[0])
    for absent in ("secret_audit", "old_export", "other_orgs"):
        assert absent not in body
    assert _offered(server) == ["create_report", "summarise_numbers", "none"]


async def test_a_timeout_falls_back_to_the_ranker_and_gate(server: ScriptedOpenAIServer) -> None:
    server.add(Delay(2.0, _choose("summarise_numbers")))
    registry = _registry(server, UNSURE, timeout=0.3)
    found = await registry.match_async("reports", org="beta")
    assert found[0].workflow_id == "create_report"
    assert found[0].why == "fixed"


async def test_a_model_error_falls_back(server: ScriptedOpenAIServer) -> None:
    server.add(Fail(500))
    found = await _registry(server, UNSURE).match_async("reports", org="beta")
    assert found[0].workflow_id == "create_report"


async def test_an_invalid_id_is_ignored_and_logged_once_per_message(
    server: ScriptedOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.add(*[_choose("secret_audit")] * 3)
    registry = _registry(server, UNSURE)
    with caplog.at_level(logging.WARNING, logger="aptix.workflows"):
        first = await registry.match_async("reports one", org="beta")
        again = await registry.match_async("reports one", org="beta")
        second = await registry.match_async("reports two", org="beta")
    assert first[0].workflow_id == again[0].workflow_id == second[0].workflow_id
    assert first[0].workflow_id == "create_report"
    assert len([r for r in caplog.records if "not a candidate" in r.getMessage()]) == 2


async def test_an_answer_nested_past_the_recursion_limit_falls_back(
    server: ScriptedOpenAIServer,
) -> None:
    server.add(reply(None, call(TOOL_NAME, "[" * 5_000 + "]" * 5_000)))
    found = await _registry(server, UNSURE).match_async("reports", org="beta")
    assert found[0].workflow_id == "create_report"


async def test_answers_are_cached_by_revision_and_message(server: ScriptedOpenAIServer) -> None:
    server.add(_choose("summarise_numbers"), _choose("create_report"))
    registry = _registry(server, UNSURE)
    for _ in range(2):
        found = await registry.match_async("the numbers thing", org="beta")
        assert found[0].workflow_id == "summarise_numbers"
    assert len(server.requests) == 1
    registry.publish(make_manifest("new_one"))  # a new revision asks again
    found = await registry.match_async("the numbers thing", org="beta")
    assert found[0].workflow_id == "create_report"
    assert len(server.requests) == 2


async def test_recorded_answers_replay(server: ScriptedOpenAIServer) -> None:
    """Recorded model answers (tool calls, JSON text, a bad id) replayed through the client."""
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    for case in recorded:
        if case["answer"].get("tool"):
            server.add(_choose(case["answer"]["tool"]))
        else:
            server.add(reply(case["answer"]["text"]))
    registry = _registry(server, UNSURE)
    for case in recorded:
        found = await registry.match_async(case["message"], org="beta")
        assert [m.workflow_id for m in found][:1] == case["expect"], case["message"]


def test_an_accepted_decision_on_weak_fit_is_unsure() -> None:
    ranked = (("greet_user", 0.95), ("author_workflow", 0.05))
    assert not Decision(ranked, 0.97).unsure
    assert Decision(ranked, 0.97, weak=True).unsure
    # Rejected far from the threshold: nothing to ask, whatever the fit.
    assert not Decision(ranked, 0.05, weak=True).unsure


async def test_a_request_the_catalog_lacks_is_put_to_the_model(
    server: ScriptedOpenAIServer,
) -> None:
    # Without the built-in model the gate passes "I need a new laptop" (request-shaped) and
    # the greeting workflow comes first; nothing close fits it, so the model is asked.
    routing = replace(default_routing(True), builtin=None)
    matcher = WorkflowMatcher(SemanticMatcher(load_embedder()), routing)
    registry = WorkflowRegistry([item.manifest for item in load_builtin()[0]], matcher=matcher)
    client = OpenAiLlmClient(base_url=server.base_url, api_key="k", model="m", max_retries=0)
    registry.arbiter = MatchArbiter(LlmArbiterModel(client), "ambiguous", timeout=5)
    registry.match("build the index")
    decision = matcher.decide("I need a new laptop")
    assert (decision.accepted, decision.weak, decision.ranked[0][0]) == (True, True, "greet_user")
    server.add(_choose("none"))
    assert await registry.match_async("I need a new laptop") == []
    assert "greet_user" in _offered(server)
    # A request that fits is not put to the model.
    found = await registry.match_async("work out 15% of 240")
    assert [m.workflow_id for m in found][:1] == ["guided_calculation"]
    assert len(server.requests) == 1


async def test_the_built_in_model_turns_down_what_no_built_in_serves_without_asking(
    server: ScriptedOpenAIServer,
) -> None:
    # The shipped built-in model reads "I need a new laptop" as asking for none of the
    # built-ins: with them alone it matches nothing, and the model is not asked.
    matcher = WorkflowMatcher(SemanticMatcher(load_embedder()))
    registry = WorkflowRegistry([item.manifest for item in load_builtin()[0]], matcher=matcher)
    client = OpenAiLlmClient(base_url=server.base_url, api_key="k", model="m", max_retries=0)
    registry.arbiter = MatchArbiter(LlmArbiterModel(client), "ambiguous", timeout=5)
    registry.match("build the index")
    for message in ("I need a new laptop", "my car needs new tyres", "order new office chairs"):
        assert await registry.match_async(message) == [], message
    for message, expected in (
        ("work out 15% of 240", "guided_calculation"),
        ("I want to write a workflow for onboarding", "author_workflow"),
        ("publish my workflow draft", "review_and_publish_workflow"),
    ):
        found = await registry.match_async(message)
        assert [m.workflow_id for m in found][:1] == [expected], message
    assert server.requests == []


@pytest.mark.parametrize(
    ("message", "weak"),
    [
        ("order new office chairs", True),
        ("I need new tyres fitted", True),
        ("create a workflow for onboarding", False),
        ("hello there", False),
    ],
)
def test_without_the_semantic_extra_weak_fit_is_few_shared_character_grams(
    message: str, weak: bool
) -> None:
    # "new" is all these share with the greeting workflow ("I am new here"): the gate passes
    # them as request-shaped; their character n-grams say nothing in the catalog is close.
    # (Without the built-in rule, which would drop the built-ins here: see the next test.)
    matcher = WorkflowMatcher(model=replace(default_routing(False), builtin=None))
    registry = WorkflowRegistry([item.manifest for item in load_builtin()[0]], matcher=matcher)
    registry.match("build the index")
    found = matcher.candidates(message)
    decision = matcher.decision(found)
    char_max = found.message[LEXICAL_GATE.index("char_max") - 2]
    assert decision.accepted
    assert decision.weak is weak is bool(char_max < WEAK_CHAR)
    assert decision.unsure or not weak


async def test_without_the_semantic_extra_a_built_in_that_barely_fits_leaves(
    server: ScriptedOpenAIServer,
) -> None:
    # The shipped lexical routing drops a built-in that comes first when its own character
    # n-grams barely meet the message's: with the built-ins alone these match nothing, and
    # the model is not asked.
    matcher = WorkflowMatcher()
    registry = WorkflowRegistry([item.manifest for item in load_builtin()[0]], matcher=matcher)
    client = OpenAiLlmClient(base_url=server.base_url, api_key="k", model="m", max_retries=0)
    registry.arbiter = MatchArbiter(LlmArbiterModel(client), "ambiguous", timeout=5)
    registry.match("build the index")
    for message in ("I need a new laptop", "order new office chairs", "I need new tyres fitted"):
        assert matcher.decide(message).gate >= 0.5, message  # request-shaped
        assert await registry.match_async(message) == [], message
    assert server.requests == []
    for message, expected in (
        ("hello there", "greet_user"),
        ("work out 15% of 240", "guided_calculation"),
        ("I want to write a workflow for onboarding", "author_workflow"),
        ("publish my workflow draft", "review_and_publish_workflow"),
    ):
        assert [w for w, _ in matcher.decide(message).matches(1)] == [expected], message
