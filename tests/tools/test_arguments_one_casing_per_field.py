"""Tool arguments give each field once: two spellings of one field are refused, naming it.

Each field is read in camelCase, PascalCase or snake_case, so ``expectedRevision`` beside
``expected_revision`` would leave one value unread; for authoring that was the precondition.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic.alias_generators import to_camel, to_pascal

from aptix.api import create_app
from aptix.runtime import BUILTIN_TOOLS, Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.tools.builtin.base import BuiltinTool

AUTHORING = "/v1/tools/agent_workflow_authoring/invoke"
REGISTRY = "/v1/tools/agent_workflow_registry/invoke"


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, semantic_matching=False)
    async with open_runtime(settings) as opened:
        yield opened


@pytest.fixture
async def client(runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(runtime=runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as opened:
        yield opened


def _failure(answer: httpx.Response) -> str:
    """The refusal's message, in the tool's failed result or in the authoring envelope."""
    assert answer.status_code == 200, answer.text
    body = answer.json()
    result = body["result"]
    if isinstance(result, dict) and result.get("ok") is False:
        return str(result["errors"][0]["message"])
    assert body["successful"] is False, body
    return str(body["errors"][0]["message"])


@pytest.mark.parametrize("order", [1, -1])
async def test_an_expected_revision_given_twice_is_refused_and_nothing_is_written(
    client: httpx.AsyncClient, order: int
) -> None:
    async def author(**arguments: Any) -> httpx.Response:
        return await client.post(AUTHORING, json={"arguments": arguments})

    await author(operation="draft_workflow", workflowId="offsite", title="T", description="D.")
    await author(operation="update_workflow", workflowId="offsite", fields={"notes": ["a"]})
    revisions = dict(list({"expected_revision": 1, "expectedRevision": 2}.items())[::order])
    answer = await author(
        operation="update_workflow", workflowId="offsite", fields={"notes": ["k1"]}, **revisions
    )
    message = _failure(answer)
    assert "'expectedRevision' is given twice" in message
    assert "use one casing per field" in message
    read = await author(operation="get_workflow", workflowId="offsite")
    assert read.json()["result"]["revision"] == 2
    assert read.json()["result"]["workflow"]["notes"] == ["a"]


async def test_a_user_message_given_twice_matches_nothing_and_says_why(
    client: httpx.AsyncClient,
) -> None:
    arguments = {
        "operation": "match_workflow",
        "user_message": "use workflow: guided_calculation",
        "UserMessage": "use workflow: greet_user",
    }
    message = _failure(await client.post(REGISTRY, json={"arguments": arguments}))
    # The keys are quoted in the order they were sent, as inside a nested object.
    assert message == (
        "'userMessage' is given twice ('user_message' and 'UserMessage'): use one casing per field."
    )


async def test_a_field_of_update_workflow_given_twice_is_refused(
    client: httpx.AsyncClient,
) -> None:
    await client.post(
        AUTHORING,
        json={
            "arguments": {
                "operation": "draft_workflow",
                "workflowId": "offsite",
                "title": "T",
                "description": "D.",
            }
        },
    )
    fields = {"notes": ["one"], "Notes": ["two"]}
    arguments = {"operation": "update_workflow", "workflowId": "offsite", "fields": fields}
    answer = await client.post(AUTHORING, json={"arguments": arguments})
    result = answer.json()["result"]
    assert result["ok"] is False
    assert result["errors"] == [
        {
            "field": "notes",
            "message": "notes is given twice ('notes' and 'Notes'); use one casing per field.",
        }
    ]


def _spellings(field: str) -> list[Callable[[str], str]]:
    return [to_camel, to_pascal] if to_camel(field) == field else [to_camel, lambda f: f]


@pytest.mark.parametrize("tool", BUILTIN_TOOLS, ids=lambda tool: tool.TOOL_NAME)
async def test_every_built_in_tool_refuses_a_field_given_twice(
    runtime: Runtime, tool: type[BuiltinTool[Any, Any]]
) -> None:
    created = await runtime.services.sessions.create_session(org="local", user="local")
    assert created.result is not None
    # The tool itself, in a session (agent_change_mode needs one), whatever the mode offers.
    context = await runtime.session_context(
        org="local", user="local", role="admin", session_id=created.result.id
    )
    built = runtime.registry.get_tool(tool.TOOL_NAME)
    assert built is not None
    for field in tool._args_model.model_fields:
        first, second = (spell(field) for spell in _spellings(field))
        outcome = await built.execute(json.dumps({first: None, second: None}), context)
        envelope = json.loads(outcome.result) if outcome.result else None
        message = envelope["errors"][0]["message"] if envelope else outcome.error_message
        assert message == (
            f"'{to_camel(field)}' is given twice ('{first}' and '{second}'): "
            "use one casing per field."
        ), (tool.TOOL_NAME, field, outcome)


async def test_a_function_tool_refuses_one_parameter_in_two_casings() -> None:
    import aptix
    from aptix.testing import RecordingLogger
    from aptix.tools.context import AgentToolExecutionContext

    @aptix.tool(usage="Sends a message to one user.")
    async def notify(user_id: str, text: str) -> str:
        """Sends a message.

        Args:
            user_id: Who gets it.
            text: What it says.
        """
        return f"{user_id}: {text}"

    tool = notify(RecordingLogger())
    context = AgentToolExecutionContext(org="acme", user="ann")
    told = await tool.execute(
        json.dumps({"user_id": "ann", "userId": "bob", "text": "hi"}), context
    )
    assert told.result is None
    assert "'userId' is given twice" in (told.error_message or "")
    fine = await tool.execute(json.dumps({"UserId": "ann", "text": "hi"}), context)
    assert fine.result == '"ann: hi"'
