"""Calls that wait for the user's approval, then run (MCP tools under an approval policy).

Such a tool is client-final on its first run: it returns an approval request, handed to the
client exactly like ``request_user_approval``. When the client posts the user's answer, an
approval runs the call for real through the executor and the model sees the tool's result;
a denial (or an error result) runs nothing and the model is told so.
"""

from __future__ import annotations

import json
from typing import Any

from aptix.reasoner.record import TurnRecord
from aptix.reasoner.result import ToolResultInput
from aptix.tools.context import AgentToolCall, AgentToolExecutionContext
from aptix.tools.executor import AgentToolExecutor

__all__ = ["is_approval", "settle_approvals"]

_YES = frozenset({"approve", "approved", "yes", "y", "true", "ok", "allow"})


def is_approval(result: ToolResultInput) -> bool:
    """Whether the client's answer approves: ``{"approved": true}``, ``true`` or "approve"."""
    if result.is_error:
        return False
    try:
        value: Any = json.loads(result.output)
    except ValueError:
        value = result.output
    if isinstance(value, dict):
        if "approved" in value:
            return value["approved"] is True
        value = value.get("decision", value.get("choice"))
    if isinstance(value, bool):
        return value
    return isinstance(value, str) and value.strip().casefold() in _YES


async def settle_approvals(
    executor: AgentToolExecutor, record: TurnRecord, context: AgentToolExecutionContext
) -> None:
    """Run (or refuse) every approval-gated call whose answer was just posted.

    The client's answer stored as the tool message is replaced by what the model should see:
    the tool's real result after an approval, or a refusal after a denial. Results of
    ordinary client-final tools are left as posted.
    """
    for audit in record.tool_calls:
        if "clientResult" not in audit or "approved" in audit:
            continue
        tool = executor.registry.get_tool(audit["name"])
        if tool is None or not hasattr(tool, "run_approved"):
            continue
        answer = ToolResultInput(audit["callId"], audit["clientResult"], audit["clientError"])
        if not is_approval(answer):
            refusal = f"The user did not approve '{audit['name']}'; it was not run."
            content = json.dumps({"error": refusal})
            audit["approved"] = False
        else:
            done = await executor.execute(
                AgentToolCall(audit["callId"], audit["name"], audit["argumentsJson"]),
                context,
                approved=True,
            )
            audit["approved"] = True
            if done.was_executed and done.result_json is not None:
                content = done.result_json
                audit["approvedResultJson"] = content
            else:
                error = done.error_message or "The tool did not run."
                content = json.dumps({"error": error})
                audit["approvedErrorMessage"] = error
        for stored in reversed(record.messages):
            if stored.get("role") == "tool" and stored.get("tool_call_id") == audit["callId"]:
                stored["content"] = content
                break
