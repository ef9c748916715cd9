"""The context budget (issue 13): every request fits, old turns go first, summaries are reused."""

from __future__ import annotations

import json
import re
import sys
import types
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from aptix.errors import LlmError
from aptix.llm.openai_client import sendable
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.reasoner.context import ContextBudget, EstimatedTokens, default_counter
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, ScriptedModel, call, reply

BUDGET = 6000


@pytest.fixture
async def small_runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, llm_context_tokens=BUDGET)
    async with open_runtime(settings) as runtime:
        yield runtime


def _instruction(n: int) -> str:
    return f"instruction-{n:02d} " + "please consider this long paragraph. " * 40


def _answer(request: LlmRequest) -> LlmResponse:
    last = request.messages[-1]
    if last["role"] == "user" and "(calc)" in last["content"]:
        return reply(None, call("agent_calculator", {"expression": "6*7"}))
    return reply("answer " + "a long and thoughtful reply sentence. " * 40)


def _assert_calls_precede_results(messages: tuple[dict[str, object], ...]) -> None:
    open_calls: set[str] = set()
    for message in messages:
        for c in message.get("tool_calls") or []:  # type: ignore[attr-defined]
            open_calls.add(c["id"])
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, "a tool result without its call"


async def test_forty_long_turns_stay_inside_a_6000_token_budget(small_runtime: Runtime) -> None:
    created = await small_runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    session_id = created.result.id
    model = FunctionModel(_answer)
    reasoner = small_runtime.reasoner(model)
    budget = ContextBudget(BUDGET, counter=EstimatedTokens())
    for n in range(1, 41):
        text = _instruction(n) + (" (calc)" if n % 5 == 0 else "")
        seen = len(model.requests)
        result = await reasoner.execute(
            session_id=session_id, org="acme", user="ann", instruction=text
        )
        assert result.kind == "ok", result.error
        for request in model.requests[seen:]:
            assert budget.request_tokens(request.messages, request.tools) <= BUDGET
            assert request.messages[0]["role"] == "system"
            assert "# Available workflows" in request.messages[0]["content"]  # boot message
            assert any(m.get("content") == text.strip() for m in request.messages)  # current turn
            _assert_calls_precede_results(request.messages)
    last = model.requests[-1].messages
    contents = " ".join(str(m.get("content")) for m in last)
    assert "instruction-01 " not in contents
    assert "instruction-30 " not in contents
    assert "instruction-39 " in contents  # the newest earlier turn fits
    turns = await small_runtime.turns.list_turns(session_id, "acme")
    dropped = turns[-1].context_dropped
    assert dropped is not None
    kept = sum(1 for t in turns[:-1] if f"instruction-{t.seq:02d} " in contents)
    assert dropped["turns"] == 39 - kept
    assert dropped["throughTurnId"] == turns[38 - kept].id
    assert dropped["summarized"] == 0
    assert turns[0].context_dropped is None


async def test_a_long_refusal_counts_toward_the_budget_of_later_turns(
    small_runtime: Runtime,
) -> None:
    # The refusal is sent as the assistant message's text (sendable): it costs what text does.
    created = await small_runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    session_id = created.result.id
    refusal = "no, I will not. " * 2_500  # 40,000 characters: far over the 6,000 tokens
    model = ScriptedModel([reply(None, refusal=refusal), reply("Hello.")])
    reasoner = small_runtime.reasoner(model)
    first = await reasoner.execute(session_id=session_id, org="acme", user="ann", instruction="Go")
    assert first.refusal == refusal
    second = await reasoner.execute(
        session_id=session_id, org="acme", user="ann", instruction="Again"
    )
    assert second.kind == "ok", second.error
    sent = sendable(model.requests[-1].messages)
    counter = EstimatedTokens()
    assert sum(counter.count(str(m.get("content") or "")) for m in sent) <= BUDGET
    assert all(m.get("content") != refusal for m in sent)
    turns = await small_runtime.turns.list_turns(session_id, "acme")
    assert turns[-1].context_dropped is not None
    assert turns[-1].context_dropped["turns"] == 1


async def test_a_current_turn_larger_than_the_budget_ends_with_a_clear_error(
    small_runtime: Runtime,
) -> None:
    created = await small_runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    model = FunctionModel(_answer)
    result = await small_runtime.reasoner(model).execute(
        session_id=created.result.id, org="acme", user="ann", instruction="x" * 30_000
    )
    assert result.kind == "error"
    assert result.error is not None
    assert "more than the context budget of 6000 tokens (APTIX_LLM_CONTEXT_TOKENS)" in result.error
    assert model.requests == []  # nothing the model would refuse was sent
    [turn] = await small_runtime.turns.list_turns(created.result.id, "acme")
    assert turn.status == "error"


def _summarizing(fail: bool) -> FunctionModel:
    def answer(request: LlmRequest) -> LlmResponse:
        if str(request.messages[0]["content"]).startswith("You condense"):
            if fail:
                raise LlmError("the summary endpoint is down")
            prompt = str(request.messages[1]["content"])
            # Folds the previous summary's turn numbers in, as a real summary would.
            covered = set(re.findall(r"instruction-(\d\d)", prompt))
            for listed in re.findall(r"SUMMARY of turns ([\d,]+)", prompt):
                covered.update(listed.split(","))
            return reply(f"SUMMARY of turns {','.join(sorted(covered))}")
        return _answer(request)

    return FunctionModel(answer)


async def _fixed_tokens(data_dir: Path) -> int:
    """What every request carries whatever the history: the system prompt and the tools."""
    settings = AptixSettings(data_dir=data_dir, load_plugins=False, llm_context_tokens=100_000)
    async with open_runtime(settings) as runtime:
        created = await runtime.services.sessions.create_session(org="acme", user="ann")
        assert created.result is not None
        model = FunctionModel(lambda request: reply("ok"))
        await runtime.reasoner(model).execute(
            session_id=created.result.id, org="acme", user="ann", instruction="hello"
        )
    [request] = model.requests
    return ContextBudget(100_000, counter=EstimatedTokens()).request_tokens(
        request.messages[:1], request.tools
    )


#: Room for past turns on top of the fixed part: the current turn and two earlier ones of
#: about 1,000 tokens each, with room to spare for a summary beside them.
HISTORY_ROOM = 2800


@pytest.mark.parametrize("fail", [False, True])
async def test_summarize_replaces_dropped_turns_once_or_degrades_to_drop(
    tmp_path: Path, fail: bool
) -> None:
    # Sized from the system prompt, so a longer built-in description cannot decide how
    # often the history overflows.
    limit = await _fixed_tokens(tmp_path / "probe") + HISTORY_ROOM
    settings = AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        llm_context_tokens=limit,
        context_strategy="summarize",
    )
    async with open_runtime(settings) as runtime:
        created = await runtime.services.sessions.create_session(org="acme", user="ann")
        assert created.result is not None
        model = _summarizing(fail)
        reasoner = runtime.reasoner(model)
        budget = ContextBudget(limit, counter=EstimatedTokens())
        for n in range(1, 16):
            result = await reasoner.execute(
                session_id=created.result.id, org="acme", user="ann", instruction=_instruction(n)
            )
            assert result.kind == "ok"
        for request in model.requests:
            assert budget.request_tokens(request.messages, request.tools) <= limit
        turns = await runtime.turns.list_turns(created.result.id, "acme")
    summary_requests = [
        r for r in model.requests if str(r.messages[0]["content"]).startswith("You condense")
    ]
    last_system = str(model.requests[-1].messages[0]["content"])
    if fail:
        assert "Could not summarize" in turns[-1].warnings[0]
        assert "the summary endpoint is down" in turns[-1].warnings[0]
        assert "SUMMARY" not in last_system
        assert turns[-1].context_dropped is not None
        assert turns[-1].context_dropped["summarized"] == 0
        return
    written = [t for t in turns if any(c.get("purpose") == "contextSummary" for c in t.model_calls)]
    # Written once and reused: fewer summaries than turns that left others out.
    assert 0 < len(written) == len(summary_requests) < sum(1 for t in turns if t.context_dropped)
    # Sent as a record of its own after the system message, never inside it.
    assert "SUMMARY" not in last_system
    framed = model.requests[-1].messages[1]
    assert framed["role"] == "assistant"
    assert "SUMMARY of turns 01,02," in framed["content"]
    assert str(framed["content"]).startswith("[Summary of the earlier conversation, written by")
    assert "instruction-01 " not in " ".join(str(m["content"]) for m in model.requests[-1].messages)
    dropped = turns[-1].context_dropped
    assert dropped is not None
    assert dropped["summarized"] == dropped["turns"] > 0
    assert all(not t.warnings for t in turns)
    calls = [c for t in turns for c in t.model_calls if c.get("purpose") == "contextSummary"]
    assert len(calls) == len(summary_requests)


async def test_a_summary_request_fits_the_budget_even_for_a_huge_dropped_turn() -> None:
    budget = ContextBudget(1000, counter=EstimatedTokens())
    from aptix.reasoner.context import PastTurn

    seen: list[LlmRequest] = []

    async def complete(request: LlmRequest, on_text: object = None) -> LlmResponse:
        seen.append(request)
        return reply("short summary")

    model = types.SimpleNamespace(complete=complete)
    huge = PastTurn("t1", 1, [{"role": "user", "content": "word " * 5000}])
    small = PastTurn("t2", 2, [{"role": "user", "content": "hello"}])
    text = await budget.summarize(model, None, [huge, small])  # type: ignore[arg-type]
    assert text == "short summary"
    assert len(seen) == 2  # the huge turn (clipped) alone, then the rest with the summary
    for request in seen:
        assert budget.request_tokens(request.messages, ()) <= 1000
    assert "[...]" in seen[0].messages[1]["content"]


def test_the_estimate_is_pessimistic_and_documented() -> None:
    estimate = EstimatedTokens()
    assert estimate.count("") == 0
    assert estimate.count("abc") == 1
    assert estimate.count("hello world!") == 4
    assert estimate.count("日本語") == 3  # 9 bytes: about one token per CJK character


def test_tiktoken_is_never_allowed_to_download_its_encoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fetched: list[str] = []
    fake = types.ModuleType("tiktoken")
    fake.get_encoding = fetched.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tiktoken", fake)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert default_counter.__wrapped__().name == "estimate"  # no file: no download either
    # tiktoken's cache file is named after the SHA-1 of the encoding's URL.
    (tmp_path / "9b5ad71b2ce5302211f9c61530b329a4922fc6a4").write_bytes(b"not the encoding")
    assert default_counter.__wrapped__().name == "estimate"  # a corrupt file is not used
    assert fetched == []


def test_context_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_LLM_CONTEXT_TOKENS", "6000")
    monkeypatch.setenv("APTIX_CONTEXT_STRATEGY", "summarize")
    settings = AptixSettings()
    assert (settings.llm_context_tokens, settings.context_strategy) == (6000, "summarize")
    assert AptixSettings.model_fields["llm_context_tokens"].default == 32_000
    assert json.loads(json.dumps(AptixSettings.model_fields["context_strategy"].default)) == "drop"


async def test_the_sessions_api_shows_what_was_left_out(tmp_path: Path) -> None:
    import httpx

    from aptix.api import create_app

    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, llm_context_tokens=BUDGET)
    async with open_runtime(settings) as runtime:
        app = create_app(runtime=runtime, model=FunctionModel(_answer))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            created = (await client.post("/v1/sessions", json={})).json()
            for n in range(1, 9):
                answered = await client.post(
                    "/v1/agent/execute",
                    json={"sessionId": created["sessionId"], "instruction": _instruction(n)},
                )
                assert answered.status_code == 200, answered.text
            shown = (await client.get(f"/v1/sessions/{created['sessionId']}")).json()
    turns = shown["turns"]
    assert turns[0]["contextDropped"] is None
    dropped = turns[-1]["contextDropped"]
    assert dropped["turns"] > 0
    assert dropped["throughTurnId"] == turns[dropped["turns"] - 1]["turnId"]


def test_tiktoken_counts_when_its_encoding_file_is_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hashlib

    from aptix.reasoner import tokens as tokens_module

    class _Encoding:
        name = "cl100k_base"
        calls = 0

        def encode_ordinary(self, text: str) -> list[int]:
            _Encoding.calls += 1
            return list(range(len(text.split())))

    fake = types.ModuleType("tiktoken")
    fake.get_encoding = lambda name: _Encoding()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tiktoken", fake)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    data = b"the encoding file"
    (tmp_path / "9b5ad71b2ce5302211f9c61530b329a4922fc6a4").write_bytes(data)
    monkeypatch.setattr(tokens_module, "_CL100K_SHA256", hashlib.sha256(data).hexdigest())
    counter = default_counter.__wrapped__()
    assert counter.name == "tiktoken:cl100k_base"
    assert counter.count("three little words") == 3
    assert counter.count("three little words") == 3
    assert _Encoding.calls == 1  # repeated texts (earlier turns) are counted once


def test_a_schema_changed_under_the_same_name_and_description_is_counted_again() -> None:
    # An MCP server reconnecting with a new version: same tool, same description, new
    # parameters. The cost remembered for the old schema must not stand for the new one.
    budget = ContextBudget(BUDGET, counter=EstimatedTokens())
    old = {
        "type": "function",
        "name": "lookup",
        "description": "Looks a record up.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    }
    properties = {f"field_{i}": {"type": "string"} for i in range(40)}
    new = {**old, "parameters": {"type": "object", "properties": properties}}
    counted = budget.request_tokens([], [old])
    assert budget.request_tokens([], [new]) == budget.request_tokens([], []) + (
        EstimatedTokens().count(json.dumps([new], ensure_ascii=False))
    )
    assert budget.request_tokens([], [new]) > counted
