"""A tool result too large for the context budget is clipped for the model, not fatal."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from aptix.llm.types import LlmRequest, LlmResponse
from aptix.reasoner.clipping import clip_result
from aptix.reasoner.context import ContextBudget, EstimatedTokens
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, call, reply

TOOL = '''
import aptix


@aptix.tool(usage="Return a blob of about n characters.")
async def blob(n: int) -> str:
    """Return a blob.

    Args:
        n: how many characters
    """
    return "START " + "x" * n + " END"


@aptix.tool(usage="Repeat the text given.")
async def echo(text: str) -> str:
    """Repeat a text.

    Args:
        text: what to repeat
    """
    return text
'''


def _settings(tmp_path: Path, limit: int) -> AptixSettings:
    tmp_path.mkdir(exist_ok=True)
    module = tmp_path / "blob_tool.py"
    module.write_text(TOOL)
    return AptixSettings(
        data_dir=tmp_path / "data",
        load_plugins=False,
        semantic_matching=False,
        tool_modules=[str(module)],
        llm_context_tokens=limit,
    )


async def _fixed_tokens(tmp_path: Path) -> int:
    """What every request carries: the system prompt and the tool schemas."""
    async with open_runtime(_settings(tmp_path / "probe", 100_000)) as runtime:
        created = await runtime.services.sessions.create_session(org="acme", user="ann")
        assert created.result is not None
        model = FunctionModel(lambda request: reply("ok"))
        await runtime.reasoner(model).execute(
            session_id=created.result.id, org="acme", user="ann", instruction="hello"
        )
    [request] = model.requests
    assert any(t.get("name") == "blob" or "blob" in json.dumps(t) for t in request.tools)
    return ContextBudget(100_000, counter=EstimatedTokens()).request_tokens(
        request.messages[:1], request.tools
    )


def _calling(*calls: int) -> FunctionModel:
    """Calls ``blob`` once per size given, then answers with what it saw."""

    def answer(request: LlmRequest) -> LlmResponse:
        if request.messages[-1]["role"] == "user":
            return reply(None, *(call("blob", {"n": n}) for n in calls))
        return reply("done")

    return FunctionModel(answer)


async def test_a_result_over_the_budget_is_clipped_for_the_model_and_the_turn_finishes(
    tmp_path: Path,
) -> None:
    limit = await _fixed_tokens(tmp_path) + 1_500
    async with open_runtime(_settings(tmp_path, limit)) as runtime:
        created = await runtime.services.sessions.create_session(org="acme", user="ann")
        assert created.result is not None
        model = _calling(200_000)
        result = await runtime.reasoner(model).execute(
            session_id=created.result.id, org="acme", user="ann", instruction="read the blob"
        )
        [turn] = await runtime.turns.list_turns(created.result.id, "acme")
    assert result.kind == "ok", result.error
    assert result.text == "done"
    _, second = model.requests
    budget = ContextBudget(limit, counter=EstimatedTokens())
    assert budget.request_tokens(second.messages, second.tools) <= limit
    [sent] = [m for m in second.messages if m["role"] == "tool"]
    content = str(sent["content"])
    assert "START xxx" in content  # the head is kept
    assert " END" not in content
    assert "[Clipped to fit the context budget: the tool ran, and the last " in content
    assert "characters of its result were left out of this request.]" in content
    # Only the request is clipped: the turn keeps the whole result.
    [stored] = [m for m in turn.messages if m["role"] == "tool"]
    assert "x" * 200_000 + " END" in str(stored["content"])
    [executed] = turn.tool_calls
    assert executed["outcome"] == "succeeded"
    assert any("'blob' was clipped to fit the context budget" in w for w in turn.warnings)


def _echoing(chars: int) -> FunctionModel:
    """Calls ``echo`` once with ``chars`` characters of arguments, then answers."""

    def answer(request: LlmRequest) -> LlmResponse:
        if request.messages[-1]["role"] == "user":
            return reply(None, call("echo", {"text": "y" * chars}))
        return reply("done")

    return FunctionModel(answer)


@pytest.mark.parametrize(
    ("tool", "model"),
    [
        # thirty results: each, clipped, still needs its marker
        ("blob", lambda: _calling(*[5_000] * 30)),
        # one call whose own arguments, which cannot be clipped, fill the room
        ("echo", lambda: _echoing(20_000)),
    ],
)
async def test_tool_calls_that_cannot_fit_are_named_in_the_overflow_error(
    tmp_path: Path, tool: str, model: Callable[[], FunctionModel]
) -> None:
    limit = await _fixed_tokens(tmp_path) + 600
    scripted = model()
    async with open_runtime(_settings(tmp_path, limit)) as runtime:
        created = await runtime.services.sessions.create_session(org="acme", user="ann")
        assert created.result is not None
        result = await runtime.reasoner(scripted).execute(
            session_id=created.result.id, org="acme", user="ann", instruction="go"
        )
    assert result.kind == "error"
    assert result.error is not None
    assert "Its tool calls (their arguments and results) take about" in result.error
    assert f"by tool: '{tool}' (about" in result.error
    assert "Shorten the instruction" not in result.error
    assert len(scripted.requests) == 1  # the model is not sent what does not fit


def test_a_result_lighter_at_its_start_is_clipped_to_its_cap_not_to_its_average() -> None:
    # Half ASCII (a third of a token a character), half CJK (one token a character): cut by
    # the average density, the start kept would be ASCII alone, about half the cap.
    counter = EstimatedTokens()
    text = "a" * 1500 + "中" * 1500
    clipped = clip_result(counter, text, 1000)
    assert 950 <= counter.count(clipped) <= 1000
    assert "中" in clipped
