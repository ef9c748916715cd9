"""Running one model response's tool calls, and the wire shapes of calls and messages."""

from __future__ import annotations

import json
from typing import Any

from aptix.llm.types import LlmResponse, Message
from aptix.tools.context import AgentToolCall
from aptix.workflows.guard import not_offered_message

__all__ = [
    "MODE_CHANGE_TOOL",
    "WORKFLOW_RUN_TOOL",
    "assistant_message",
    "branched_id",
    "not_offered",
    "wire_call",
]

MODE_CHANGE_TOOL = "agent_change_mode"
WORKFLOW_RUN_TOOL = "agent_workflow_run"


def assistant_message(response: LlmResponse) -> Message:
    """The model's response as a transcript message (with its tool calls)."""
    message: Message = {"role": "assistant", "content": response.text}
    if response.refusal:
        message["refusal"] = response.refusal
    if response.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in response.tool_calls
        ]
    return message


def not_offered(call: AgentToolCall) -> AgentToolCall:
    """A failed call for a tool the session's mode or workflow does not offer."""
    return AgentToolCall(
        call.call_id,
        call.name,
        call.arguments_json,
        error_message=not_offered_message(call.name),
    )


def branched_id(result_json: str | None) -> str | None:
    """The new session id a branching mode change returned, if any."""
    try:
        value = json.loads(result_json or "{}").get("branchedSessionId")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def wire_call(call: AgentToolCall) -> dict[str, Any]:
    """A call as the API and the turn record show it."""
    return {
        "callId": call.call_id,
        "name": call.name,
        "argumentsJson": call.arguments_json,
        "isServerTool": call.is_server_tool,
        "wasExecuted": call.was_executed,
        "requiresClientExecution": call.requires_client_execution,
        "resultJson": call.result_json,
        "errorMessage": call.error_message,
    }


def tool_message(call: AgentToolCall) -> Message:
    """The tool-result message the model sees for a finished server call."""
    content = call.result_json if call.was_executed else json.dumps({"error": call.error_message})
    return {"role": "tool", "tool_call_id": call.call_id, "content": content}
