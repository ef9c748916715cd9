"""A registered tool MCP does not serve is refused with the reason, not as an unknown tool."""

from __future__ import annotations

from typing import Any, ClassVar

from mcp.client.client import Client

from aptix import AgentTool, InvokeResult
from aptix.mcp import build_mcp_server
from aptix.runtime import Runtime
from aptix.tools import AgentToolExecutionContext, function_schema
from aptix.tools.args import ToolArgs


class _NoArgs(ToolArgs):
    pass


class _GatedTool(AgentTool):
    """Runs only after a person approved it, as an MCP server's tool under an approval policy."""

    TOOL_NAME = "gated_delete"
    TOOL_USAGE_METADATA: ClassVar[str] = "Deletes after the user approved."
    is_fully_executed_on_server: ClassVar[bool] = False

    def __init__(self, logger: Any) -> None:
        self.logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        return function_schema(cls.TOOL_NAME, "A gated tool.", _NoArgs)

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        return InvokeResult.create('{"kind": "approval_request"}')

    async def run_approved(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        return InvokeResult.create('{"deleted": true}')


async def test_a_client_final_tool_is_refused_with_its_reason(runtime: Runtime) -> None:
    async with Client(build_mcp_server(runtime)) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        refused = await client.call_tool("Request_User_Approval", {"prompt": "Go?"})
        unknown = await client.call_tool("no_such_tool", {})
    assert "request_user_approval" not in listed
    assert refused.is_error
    assert refused.content[0].text == (  # type: ignore[union-attr]
        "The tool 'request_user_approval' is client-final, so it is not served over MCP: an "
        "MCP client cannot post its result back. A model turn (POST /v1/agent/execute) hands "
        "it to the client."
    )
    assert unknown.is_error
    assert unknown.content[0].text == "Unknown tool 'no_such_tool'."  # type: ignore[union-attr]


async def test_a_tool_that_waits_for_approval_is_refused_with_its_reason(
    runtime: Runtime,
) -> None:
    runtime.registry.register(_GatedTool)
    async with Client(build_mcp_server(runtime)) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        refused = await client.call_tool("gated_delete", {})
    assert "gated_delete" not in listed
    assert refused.is_error
    assert refused.content[0].text == (  # type: ignore[union-attr]
        "The tool 'gated_delete' runs only after a person approves it, so it is not served "
        "over MCP: an MCP call cannot carry that approval. A model turn (POST "
        "/v1/agent/execute) asks the client for it."
    )
