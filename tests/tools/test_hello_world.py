from __future__ import annotations

import json

import pytest

from aptix import AgentToolRegistry
from aptix.testing import RecordingLogger
from aptix.tools import AgentToolExecutionContext
from aptix.tools.builtin.hello_world import HelloWorldTool


def test_registers_under_the_contract(logger: RecordingLogger) -> None:
    registry = AgentToolRegistry(logger)
    registry.register(HelloWorldTool)
    assert registry.registered_tools == ("agent_hello_world",)
    assert HelloWorldTool(logger).name == "agent_hello_world"


@pytest.mark.parametrize("args", ['{"name": "Ann"}', '{"Name": "Ann"}', '{"name": "  Ann "}'])
async def test_greets_by_name_with_ids_from_the_context(
    logger: RecordingLogger, context: AgentToolExecutionContext, args: str
) -> None:
    outcome = await HelloWorldTool(logger).execute(args, context)
    assert outcome.successful
    payload = json.loads(outcome.result or "")
    assert payload == {
        "message": "Hello, Ann! Welcome to Aptix.",
        "conversationId": "conv-1",
        "sessionId": context.session_id,
    }


@pytest.mark.parametrize("args", ["", "  ", "{}", '{"name": ""}', '{"name": "   "}'])
async def test_missing_name_is_a_validation_failure(
    logger: RecordingLogger, context: AgentToolExecutionContext, args: str
) -> None:
    outcome = await HelloWorldTool(logger).execute(args, context)
    assert not outcome.successful
    assert outcome.error_message == "HelloWorldTool requires a non-empty 'name' string."
    assert outcome.result is None


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ("not json", "valid JSON object"),
        ("[1, 2]", "must be a JSON object"),
        ('{"name": 5}', "'name': input should be a valid string"),
    ],
)
async def test_malformed_arguments_are_described(
    logger: RecordingLogger, context: AgentToolExecutionContext, args: str, fragment: str
) -> None:
    outcome = await HelloWorldTool(logger).execute(args, context)
    assert not outcome.successful
    assert fragment in (outcome.error_message or "")
