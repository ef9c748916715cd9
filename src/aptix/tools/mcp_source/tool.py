"""One ``AgentTool`` class per MCP tool: schema, annotations, approval and result mapping."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any, ClassVar

from mcp import types

from aptix.logger import AdminLogger
from aptix.results import InvokeResult
from aptix.settings_mcp import ApprovalPolicy
from aptix.tools.args import SIMPLE_TYPES
from aptix.tools.base import AgentTool
from aptix.tools.context import AgentToolExecutionContext
from aptix.tools.executor import CallEndedError
from aptix.tools.json_schema import normalize_object_schema
from aptix.tools.mcp_source.connection import McpCallError, McpConnection
from aptix.tools.mcp_source.replies import server_words

__all__ = [
    "APPROVAL_DETAILS_CHARS",
    "IDEMPOTENCY_META_KEY",
    "MAX_DESCRIPTION_CHARS",
    "MAX_PROPERTY_DESCRIPTION_CHARS",
    "MAX_SCHEMA_CHARS",
    "McpTool",
    "make_mcp_tool",
    "needs_approval",
]

#: Caps on what a server's tool puts in every request of the modes that offer it: one tool
#: with a 2 MB description would otherwise break every turn (docs/mcp-servers.md).
MAX_DESCRIPTION_CHARS = 4_000
MAX_PROPERTY_DESCRIPTION_CHARS = 1_000
MAX_SCHEMA_CHARS = 32_000

#: The key of ``params._meta`` that carries a call's idempotency key to an MCP server.
IDEMPOTENCY_META_KEY = "aptix/idempotencyKey"

#: How much of the arguments an approval request's ``details`` quotes (all are in
#: ``arguments``).
APPROVAL_DETAILS_CHARS = 2_000

_ANY_TYPE = {"anyOf": [{"type": t} for t in sorted(SIMPLE_TYPES)]}


def needs_approval(policy: ApprovalPolicy, annotations: types.ToolAnnotations | None) -> bool:
    """Whether a call must be approved first; unset hints take the MCP defaults.

    MCP says a tool is not read-only and is destructive unless its annotations say otherwise.
    """
    if policy == "never":
        return False
    if policy == "always":
        return True
    hints = annotations or types.ToolAnnotations()
    return hints.read_only_hint is not True and hints.destructive_hint is not False


class McpTool(AgentTool):
    """Base of the generated classes: a call forwarded to the server's tool."""

    connection: ClassVar[McpConnection]
    remote_name: ClassVar[str]
    tool_schema: ClassVar[dict[str, Any]]
    needs_approval: ClassVar[bool]

    def __init__(self, logger: AdminLogger) -> None:
        self._logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """Return the function-tool schema (the server's input schema, normalised)."""
        return copy.deepcopy(cls.tool_schema)

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        """Call the server's tool, or, when it needs approval, prepare the question instead."""
        arguments = _arguments(arguments_json)
        if isinstance(arguments, str):
            return InvokeResult.from_error(arguments)
        if self.needs_approval:
            return InvokeResult.create(self._approval_request(arguments, context))
        return await self._call(arguments, context)

    async def run_approved(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        """Call the server's tool after the user approved it."""
        arguments = _arguments(arguments_json)
        if isinstance(arguments, str):
            return InvokeResult.from_error(arguments)
        return await self._call(arguments, context)

    async def _call(
        self, arguments: dict[str, Any], context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        # The same key on every attempt of one call, so the server can refuse a repeat.
        key = context.idempotency_key
        meta = {IDEMPOTENCY_META_KEY: key} if key else None
        try:
            result = await self.connection.call_tool(self.remote_name, arguments, meta)
        except McpCallError as exc:
            message = f"The tool '{self.TOOL_NAME}' failed: {exc}"
            if exc.kind == "timeout":
                raise CallEndedError(message, "timed_out") from None
            if exc.kind == "lost":
                raise CallEndedError(
                    f"{message}. The connection was lost after the request was sent, so it "
                    "may have taken effect; check before retrying.",
                    "unknown",
                ) from None
            return InvokeResult.from_error(message)
        return result_to_json(result, self.TOOL_NAME, self.connection.config.max_result_bytes)

    @classmethod
    def mcp_result(cls, text: str) -> types.CallToolResult:
        """The MCP result of a call, as Aptix re-exports it: the server's own content blocks.

        The listing carries the server's output schema, which its structured content follows
        (our wrapper of the two does not). Images, audio and links come as the text that
        describes them, as a model gets them.
        """
        payload = json.loads(text)
        return types.CallToolResult(
            content=[_block(item) for item in payload["content"]],
            structured_content=payload["structuredContent"],
        )

    def _approval_request(
        self, arguments: dict[str, Any], context: AgentToolExecutionContext
    ) -> str:
        server = self.connection.name
        hints = self.TOOL_ANNOTATIONS or {}
        details = "Arguments: " + json.dumps(arguments, ensure_ascii=False)
        if len(details) > APPROVAL_DETAILS_CHARS:
            # A cut must show: what hides past it (`; rm -rf /`) is what is being approved.
            hidden = len(details) - APPROVAL_DETAILS_CHARS
            details = f"{details[:APPROVAL_DETAILS_CHARS]}… ({hidden} more characters not shown)"
        return json.dumps(
            {
                "kind": "approval_request",
                "prompt": f"Allow '{self.TOOL_NAME}' (tool '{self.remote_name}' of the MCP "
                f"server '{server}') to run?",
                "action": self.TOOL_NAME,
                "details": details,
                "arguments": arguments,
                "destructive": hints.get("destructiveHint") is not False
                and hints.get("readOnlyHint") is not True,
                "choices": ["approve", "reject"],
                "conversationId": context.conversation_id,
                "sessionId": context.session_id,
            }
        )


def _clipped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def make_mcp_tool(
    connection: McpConnection,
    remote: types.Tool,
    local_name: str,
    approval: ApprovalPolicy,
    warn: Callable[[str], None] = lambda _: None,
) -> type[McpTool]:
    """A tool class for ``remote``; ``ValueError`` naming the tool when its schema cannot serve.

    Descriptions longer than the caps are cut, each cut told to ``warn`` naming the server
    and the tool; a schema still over :data:`MAX_SCHEMA_CHARS` is refused.
    """
    server = connection.name
    where = f"MCP server '{server}', tool '{remote.name}'"
    try:
        parameters = normalize_object_schema(remote.input_schema)
    except ValueError as exc:
        raise ValueError(
            f"MCP server '{server}', tool '{remote.name}': its input schema cannot be offered "
            f"to a model ({exc})."
        ) from exc
    properties: dict[str, Any] = parameters["properties"]
    for key, prop in properties.items():
        if not any(k in prop for k in ("type", "anyOf")):
            prop.update(_ANY_TYPE)
        if not str(prop.get("description") or "").strip():
            prop["description"] = f"The '{key}' argument."
        elif len(str(prop["description"])) > MAX_PROPERTY_DESCRIPTION_CHARS:
            warn(
                f"{where}: the description of '{key}' has {len(str(prop['description']))} "
                f"characters; cut to {MAX_PROPERTY_DESCRIPTION_CHARS}."
            )
            prop["description"] = _clipped(str(prop["description"]), MAX_PROPERTY_DESCRIPTION_CHARS)
    description = (remote.description or remote.title or "").strip() or (
        f"The '{remote.name}' tool of the MCP server '{server}'."
    )
    if len(description) > MAX_DESCRIPTION_CHARS:
        warn(
            f"{where}: its description has {len(description)} characters; cut to "
            f"{MAX_DESCRIPTION_CHARS}."
        )
        description = _clipped(description, MAX_DESCRIPTION_CHARS)
    size = len(json.dumps(parameters, ensure_ascii=False))
    if size > MAX_SCHEMA_CHARS:
        raise ValueError(
            f"{where}: its input schema has {size} characters, over the cap of "
            f"{MAX_SCHEMA_CHARS}; it would crowd every request of the modes offering it."
        )
    gated = needs_approval(approval, remote.annotations)
    usage = f"A tool of the MCP server '{server}'; call it when its description fits the request."
    if gated:
        usage += " The user is asked to approve each call before it runs."
    hints = (
        remote.annotations.model_dump(by_alias=True, exclude_none=True)
        if remote.annotations
        else {}
    )
    if remote.title and "title" not in hints:
        hints["title"] = remote.title
    namespace: dict[str, Any] = {
        "TOOL_NAME": local_name,
        "TOOL_USAGE_METADATA": usage,
        "TOOL_ANNOTATIONS": hints or None,
        "TOOL_OUTPUT_SCHEMA": remote.output_schema,
        "is_fully_executed_on_server": not gated,
        "connection": connection,
        "remote_name": remote.name,
        "needs_approval": gated,
        "tool_schema": {
            "type": "function",
            "name": local_name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": parameters["required"],
            },
        },
        "__module__": __name__,
        "__doc__": f"MCP tool '{remote.name}' of server '{server}'.",
    }
    return type(f"McpTool_{local_name}", (McpTool,), namespace)


def result_to_json(result: types.CallToolResult, name: str, limit: int) -> InvokeResult[str]:
    """Map an MCP result onto ours: text and structured content kept; errors and oversize fail."""
    content = [_content(item) for item in result.content]
    if result.is_error:
        text = " ".join(c["text"] for c in content if c.get("type") == "text").strip()
        return InvokeResult.from_error(
            f"The tool '{name}' reported an error: {server_words(text) or 'no details given'}"
        )
    payload = {"content": content, "structuredContent": result.structured_content}
    text = json.dumps(payload, ensure_ascii=False)
    if len(text.encode()) > limit:
        return InvokeResult.from_error(
            f"The tool '{name}' returned {len(text.encode())} bytes, over the limit of "
            f"{limit} bytes; nothing of it was kept."
        )
    return InvokeResult.create(text)


def _content(item: Any) -> dict[str, Any]:
    kind = getattr(item, "type", "unknown")
    if isinstance(item, types.TextContent):
        return {"type": "text", "text": item.text}
    if isinstance(item, types.EmbeddedResource):
        resource = item.resource
        out: dict[str, Any] = {"type": "resource", "uri": str(resource.uri)}
        if isinstance(resource, types.TextResourceContents):
            out["text"] = resource.text
        return out
    # Images, audio and links: described, not inlined (models take no binary tool results).
    described: dict[str, Any] = {"type": kind}
    for field in ("mime_type", "uri", "name"):
        value = getattr(item, field, None)
        if value is not None:
            described["mimeType" if field == "mime_type" else field] = str(value)
    return described


def _block(item: dict[str, Any]) -> types.ContentBlock:
    """The MCP content block that :func:`_content` described."""
    if item["type"] == "text":
        return types.TextContent(type="text", text=item["text"])
    if item["type"] == "resource" and "text" in item:
        return types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(uri=item["uri"], text=item["text"]),
        )
    return types.TextContent(type="text", text=json.dumps(item, ensure_ascii=False))


def _arguments(arguments_json: str) -> dict[str, Any] | str:
    text = arguments_json if arguments_json and not arguments_json.isspace() else "{}"
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return f"Arguments must be a valid JSON object ({exc})."
    if not isinstance(value, dict):
        return "Arguments must be a JSON object."
    return value
