"""Every tool reads a field given twice alike, whether it is a class, a function or built in.

Review r1 (round 70): a class tool whose ``ToolArgs`` model has no nested object ran with
``{"orderId": 1, "order_id": 2}`` and dropped the 2 without a word (F1), while the same model
with a nested object refused it; ``{"orderId": 1, "ORDERID": 2}`` was refused only by tools
with a nested object (F3). One rule now holds at every level of every tool's arguments: a key
is read as the field its letters spell (any case, with or without underscores), and two keys
of one object that spell one field are refused, naming it. An object whose model keeps extra
keys (``extra="allow"``) reads a field only in its camelCase, PascalCase or snake_case
spelling: any other key is one of its extra keys (F2: ``PATH`` beside ``path``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, ConfigDict, Field

import aptix
from aptix import AgentTool, InvokeResult, ToolArgs, function_schema, parse_arguments
from aptix.api import create_app
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import RecordingLogger
from aptix.tools.builtin.hello_world import HelloWorldTool
from aptix.tools.context import AgentToolExecutionContext

CONTEXT = AgentToolExecutionContext(org="acme", user="ann", conversation_id="c")


class _Address(BaseModel):
    street_name: str = ""


class _Env(BaseModel):
    model_config = ConfigDict(extra="allow")

    path: str


class _Flat(ToolArgs):
    order_id: int | None = Field(None, description="Which order.")
    text: str | None = Field(None, description="A note.")


class _Nested(ToolArgs):
    order_id: int | None = Field(None, description="Which order.")
    address: _Address | None = Field(None, description="Where to.")


class _Open(ToolArgs):
    model_config = ConfigDict(extra="allow")

    order_id: int | None = Field(None, description="Which order.")


def _class_tool(name: str, model: type[ToolArgs]) -> type[AgentTool]:
    """A class tool written as docs/writing-a-tool.md's ShoutTool: parse_arguments, then work."""

    class _Tool(AgentTool):
        TOOL_NAME = name
        TOOL_USAGE_METADATA = "Call this to test."
        is_fully_executed_on_server = True

        def __init__(self, logger: Any) -> None:
            self._logger = logger

        @classmethod
        def schema(cls) -> dict[str, Any]:
            return function_schema(cls.TOOL_NAME, "Tests.", model)

        async def execute(self, arguments_json: str, context: Any) -> InvokeResult[str]:
            parsed = parse_arguments(model, arguments_json)
            if parsed.result is None:
                return InvokeResult(errors=parsed.errors)
            return InvokeResult.create(json.dumps({"orderId": parsed.result.order_id}))

    return _Tool


@aptix.tool(usage="Call this to test.")
async def flat_function(order_id: int | None = None, text: str | None = None) -> dict[str, Any]:
    """Tests.

    Args:
        order_id: Which order.
        text: A note.
    """
    return {"orderId": order_id}


@aptix.tool(usage="Call this to test.")
async def nested_function(
    order_id: int | None = None, address: _Address | None = None
) -> dict[str, Any]:
    """Tests.

    Args:
        order_id: Which order.
        address: Where to.
    """
    return {"orderId": order_id}


@aptix.tool(usage="Call this to test.")
async def with_env(address: _Address, env: _Env | None = None) -> dict[str, Any]:
    """Tests.

    Args:
        address: Where to.
        env: The environment.
    """
    return {"env": None if env is None else env.model_dump()}


TOOLS = [
    _class_tool("acme_flat", _Flat),
    _class_tool("acme_nested", _Nested),
    flat_function,
    nested_function,
]


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.TOOL_NAME)
@pytest.mark.parametrize(
    ("arguments", "quoted"),
    [
        ({"orderId": 1, "order_id": 2}, "('orderId' and 'order_id')"),
        ({"order_id": 1, "OrderId": 2}, "('order_id' and 'OrderId')"),
        ({"orderId": 1, "ORDERID": 2}, "('orderId' and 'ORDERID')"),
        ({"ORDER_ID": 1, "order_id": 2}, "('ORDER_ID' and 'order_id')"),
        ({"order\u005fid": 1, "orderId": 2}, "('order_id' and 'orderId')"),
    ],
)
async def test_a_top_level_field_given_twice_is_refused_by_every_tool(
    tool: type[AgentTool], arguments: dict[str, Any], quoted: str
) -> None:
    told = await tool(RecordingLogger()).execute(json.dumps(arguments), CONTEXT)
    assert told.result is None
    assert told.error_message == f"'orderId' is given twice {quoted}: use one casing per field."


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.TOOL_NAME)
@pytest.mark.parametrize("key", ["orderId", "OrderId", "order_id", "ORDER_ID", "ORDERID"])
async def test_a_top_level_field_given_once_is_read_by_every_tool(
    tool: type[AgentTool], key: str
) -> None:
    told = await tool(RecordingLogger()).execute(json.dumps({key: 7, "other": 1}), CONTEXT)
    assert told.result is not None, told.error_message
    assert json.loads(told.result) == {"orderId": 7}


async def test_a_built_in_tool_refuses_a_field_spelled_by_its_letters_alone_twice() -> None:
    told = await HelloWorldTool(RecordingLogger()).execute('{"name": "a", "NAME": "b"}', CONTEXT)
    assert told.error_message == (
        "'name' is given twice ('name' and 'NAME'): use one casing per field."
    )


def test_parse_arguments_refuses_a_field_given_twice_without_a_nested_object() -> None:
    parsed = parse_arguments(_Flat, '{"orderId": 1, "order_id": 2}')
    assert parsed.error_message == (
        "'orderId' is given twice ('orderId' and 'order_id'): use one casing per field."
    )


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, semantic_matching=False)
    async with open_runtime(settings) as opened:
        opened.registry.register(_class_tool("acme_flat", _Flat))
        yield opened


async def test_a_class_tool_refuses_a_field_given_twice_over_http(runtime: Runtime) -> None:
    transport = httpx.ASGITransport(app=create_app(runtime=runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        answer = await client.post(
            "/v1/tools/acme_flat/invoke", json={"arguments": {"orderId": 1, "order_id": 2}}
        )
    body = answer.json()
    assert body["successful"] is False, body
    assert body["errors"][0]["message"] == (
        "'orderId' is given twice ('orderId' and 'order_id'): use one casing per field."
    )


@pytest.mark.parametrize(
    ("env", "read"),
    [
        # Environment variables are case-sensitive: PATH is another key, kept as an extra.
        ({"path": "/x", "PATH": "/usr/bin"}, {"path": "/x", "PATH": "/usr/bin"}),
        ({"PATH": "/usr/bin", "path": "/x"}, {"path": "/x", "PATH": "/usr/bin"}),
        ({"Path": "/x", "HOME": "/root"}, {"path": "/x", "HOME": "/root"}),
        ({"path": "/x", "PA_TH": "/y"}, {"path": "/x", "PA_TH": "/y"}),
    ],
)
async def test_a_nested_object_that_keeps_extra_keys_keeps_a_key_its_letters_match(
    env: dict[str, str], read: dict[str, str]
) -> None:
    arguments = {"address": {"streetName": "a"}, "env": env}
    told = await with_env(RecordingLogger()).execute(json.dumps(arguments), CONTEXT)
    assert told.result is not None, told.error_message
    assert json.loads(told.result) == {"env": read}


async def test_a_nested_object_that_keeps_extra_keys_refuses_a_field_in_two_casings() -> None:
    arguments = {"address": {"streetName": "a"}, "env": {"path": "/x", "Path": "/y"}}
    told = await with_env(RecordingLogger()).execute(json.dumps(arguments), CONTEXT)
    assert told.error_message == (
        "'env.path' is given twice ('path' and 'Path'): use one casing per field."
    )


def test_arguments_that_keep_extra_keys_read_a_field_only_in_its_casings() -> None:
    kept = parse_arguments(_Open, '{"orderId": 1, "ORDERID": 2}')
    assert kept.result is not None, kept.error_message
    assert kept.result.order_id == 1
    assert kept.result.model_extra == {"ORDERID": 2}
    refused = parse_arguments(_Open, '{"orderId": 1, "order_id": 2}')
    assert refused.error_message == (
        "'orderId' is given twice ('orderId' and 'order_id'): use one casing per field."
    )
