"""``is_fully_executed_on_server`` as AGN-005 writes it (a property) means the same everywhere.

The registry reads the flag from the built instance, once; the executor, ``GET /v1/tools``, the
MCP server and the CLI all ask the registry, so a property-declared client-final tool is never
listed or run over MCP as if it were server-final, and the tool list never fails.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.client import Client

from aptix import AgentTool, AgentToolExecutionContext, InvokeResult
from aptix.api.app import create_app
from aptix.errors import ToolContractError
from aptix.mcp import build_mcp_server
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import RecordingLogger
from aptix.tools.args import ToolArgs, function_schema
from aptix.tools.context import AgentToolCall
from aptix.tools.registry import AgentToolRegistry

# Written to a file and loaded with APTIX_TOOL_MODULES, as a third party would ship it.
_PLUGIN = """
from typing import Any
from aptix import AgentTool, InvokeResult
from aptix.tools.args import ToolArgs, function_schema


class DeleteOnClientTool(AgentTool):
    TOOL_NAME = "acme_delete_on_client"
    TOOL_USAGE_METADATA = "Call this when the user asks to delete a local file."

    def __init__(self, logger: Any) -> None:
        self._logger = logger

    @property
    def is_fully_executed_on_server(self) -> bool:
        return False

    @classmethod
    def schema(cls) -> dict[str, Any]:
        return function_schema(cls.TOOL_NAME, "Prepares deleting a file.", ToolArgs)

    async def execute(self, arguments_json: str, context: Any) -> InvokeResult[str]:
        return InvokeResult.create('{"prepared": true}')
"""


def _tool(name: str, flag: Any) -> type[AgentTool]:
    """A minimal tool class whose ``is_fully_executed_on_server`` is ``flag`` as written."""

    async def execute(
        self: AgentTool, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        return InvokeResult.create("{}")

    body = {
        "TOOL_NAME": name,
        "TOOL_USAGE_METADATA": "Call this in tests.",
        "is_fully_executed_on_server": flag,
        "__init__": lambda self, logger: None,
        "schema": classmethod(lambda cls: function_schema(name, "A test tool.", ToolArgs)),
        "execute": execute,
    }
    return type(name.title(), (AgentTool,), body)


async def test_a_property_declared_client_final_tool_is_client_final_on_every_surface(
    tmp_path: Path,
) -> None:
    plugin = tmp_path / "tool_prop.py"
    plugin.write_text(textwrap.dedent(_PLUGIN))
    settings = AptixSettings(
        data_dir=tmp_path / "data",
        semantic_matching=False,
        tool_modules=[str(plugin)],
        load_plugins=False,
    )
    async with open_runtime(settings) as runtime:
        assert runtime.registry.server_final("acme_delete_on_client") is False
        transport = httpx.ASGITransport(app=create_app(runtime=runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            listed = await http.get("/v1/tools")
        assert listed.status_code == 200, listed.text
        rows = {row["name"]: row for row in listed.json()}
        assert rows["acme_delete_on_client"]["serverFinal"] is False
        assert rows["agent_calculator"]["serverFinal"] is True

        async with Client(build_mcp_server(runtime)) as mcp:
            names = [t.name for t in (await mcp.list_tools()).tools]
            called = await mcp.call_tool("acme_delete_on_client", {})
        assert "acme_delete_on_client" not in names
        assert called.is_error  # MCP must not report a client's step as done

        context = AgentToolExecutionContext(session_id="s1", org="local", user="local")
        done = await runtime.executor.execute(
            AgentToolCall("c1", "acme_delete_on_client", "{}"), context
        )
        assert done.was_executed
        assert done.requires_client_execution


@pytest.mark.parametrize(
    ("flag", "wording"),
    [
        ("false", "not str"),
        (0, "not int"),
        (lambda self: False, "not a method"),
    ],
)
def test_a_flag_no_instance_could_answer_with_a_bool_is_refused_naming_the_tool(
    flag: Any, wording: str
) -> None:
    registry = AgentToolRegistry(RecordingLogger())
    with pytest.raises(ToolContractError) as refused:
        registry.register(_tool("odd_flag", flag))
    assert "'odd_flag'" in str(refused.value)
    assert wording in str(refused.value)
    assert registry.registered_tools == ()


def test_a_property_answering_a_non_bool_stops_the_build_naming_the_tool() -> None:
    registry = AgentToolRegistry(RecordingLogger())
    registry.register(_tool("says_false", property(lambda self: "false")))
    with pytest.raises(ToolContractError, match=r"'says_false'.*must be a bool, not str"):
        registry.build_all()


def test_the_flag_is_read_once_when_the_tool_is_built() -> None:
    answers = iter([False, True])
    registry = AgentToolRegistry(RecordingLogger())
    registry.register(_tool("fickle", property(lambda self: next(answers))))
    assert registry.server_final("fickle") is False
    assert registry.server_final("FICKLE") is False  # still the first answer
    assert registry.server_final("missing") is None
