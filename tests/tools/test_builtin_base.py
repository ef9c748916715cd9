"""BuiltinTool, the typed base of the built-in tools: what every built-in gets from it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import Field

from aptix.results import InvokeResult
from aptix.testing import RecordingLogger
from aptix.tools import AgentToolExecutionContext
from aptix.tools.builtin.base import BuiltinTool, CallResult, OperationArgs, Refusal, hints
from aptix.tools.builtin.hello_world import HelloWorldTool


class _Args(OperationArgs):
    count: int | None = Field(None, description="How many.")


class _Result(CallResult):
    doubled: int


class _Doubler(BuiltinTool[_Args, _Result]):
    """Doubles ``count``; ``operation: "explode"`` raises."""

    TOOL_NAME = "test_doubler"
    TOOL_USAGE_METADATA = "Doubles a number."
    TOOL_ANNOTATIONS = hints("Doubler", read_only=True, idempotent=True)

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """Return the function-tool schema."""
        return cls.function_schema("Doubles a number.", required=("count",))

    async def run(self, args: _Args, context: AgentToolExecutionContext) -> _Result | Refusal:
        """Double the count."""
        if args.operation.strip() == "explode":
            raise RuntimeError("secret detail")
        if args.count is None:
            return InvokeResult.from_error("Doubler requires 'count'.")
        return _Result(doubled=args.count * 2)


async def test_the_result_carries_the_ids_of_the_context(
    logger: RecordingLogger, context: AgentToolExecutionContext
) -> None:
    outcome = await _Doubler(logger).execute('{"count": 4}', context)
    assert json.loads(outcome.result or "") == {
        "conversationId": "conv-1",
        "sessionId": context.session_id,
        "doubled": 8,
    }


async def test_bad_arguments_and_refusals_are_failed_results(
    logger: RecordingLogger, context: AgentToolExecutionContext
) -> None:
    bad = await _Doubler(logger).execute('{"count": "many"}', context)
    assert bad.result is None
    assert (bad.error_message or "").startswith("Invalid arguments:")
    refused = await _Doubler(logger).execute("{}", context)
    assert (refused.result, refused.error_message) == (None, "Doubler requires 'count'.")
    assert logger.records == []


async def test_an_unexpected_exception_is_logged_with_the_tag_and_the_operation(
    logger: RecordingLogger, context: AgentToolExecutionContext
) -> None:
    outcome = await _Doubler(logger).execute('{"operation": " explode ", "count": 1}', context)
    assert outcome.error_message == (
        "The tool 'test_doubler' failed unexpectedly. The error has been logged."
    )
    assert "secret" not in (outcome.error_message or "")
    [record] = logger.of_kind("exception")
    assert record.tag == "[test_doubler_ExecuteAsync__Exception]"
    assert record.pairs["Operation"] == "explode"
    assert record.pairs["SessionId"] == context.session_id


def test_the_argument_model_comes_from_the_generic_base() -> None:
    schema = _Doubler.schema()
    assert schema["name"] == "test_doubler"
    assert schema["parameters"]["required"] == ["count"]
    assert set(schema["parameters"]["properties"]) == {"operation", "count"}
    assert _Doubler.TOOL_ANNOTATIONS == {
        "title": "Doubler",
        "readOnlyHint": True,
        "idempotentHint": True,
        "openWorldHint": False,
    }


def test_a_builtin_refuses_a_missing_logger() -> None:
    with pytest.raises(TypeError, match=r"^HelloWorldTool requires a logger, not None\.$"):
        HelloWorldTool(None)  # type: ignore[arg-type]
