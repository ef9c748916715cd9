"""``request_user_approval``: prepares an approval question that the client asks the person."""

from __future__ import annotations

from typing import Any

from pydantic import Field, StrictBool

from aptix.results import InvokeResult
from aptix.tools.args import ToolArgs
from aptix.tools.builtin.base import BuiltinTool, CallResult, Refusal, hints, too_long
from aptix.tools.context import AgentToolExecutionContext

__all__ = ["UserApprovalTool"]

MAX_PROMPT_LENGTH = 2_000


class _Args(ToolArgs):
    prompt: str | None = Field(None, description="The yes/no question to put to the user.")
    action: str | None = Field(None, description="Short name of the action awaiting approval.")
    details: str | None = Field(None, description="What exactly will happen if approved.")
    # Strict, as every built-in flag: "yes" must not mark an action destructive, nor "no" not.
    destructive: StrictBool | None = Field(
        None, description="True when the action deletes, overwrites or publishes something."
    )


class _Result(CallResult):
    kind: str = "approval_request"
    prompt: str
    action: str | None
    details: str | None
    destructive: bool
    choices: tuple[str, ...] = ("approve", "reject")


class UserApprovalTool(BuiltinTool[_Args, _Result]):
    """Client-final: the server validates and shapes the request; the client asks the person."""

    TOOL_NAME = "request_user_approval"
    TOOL_USAGE_METADATA = (
        "Call this tool before any irreversible or destructive step (deleting, overwriting, "
        "publishing, modifying user assets) and whenever a workflow requires approval. Show "
        "the exact action in 'prompt' and 'details'. The user's answer comes back as the "
        "tool result; do not proceed unless it approves."
    )
    is_fully_executed_on_server = False
    TOOL_ANNOTATIONS = hints("Ask the user to approve", read_only=True)

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """Return the function-tool schema."""
        description = "Asks the user to approve or reject an action before it is carried out."
        return cls.function_schema(description, required=("prompt",))

    async def run(self, args: _Args, context: AgentToolExecutionContext) -> _Result | Refusal:
        """Validate the request and return the payload the client will show."""
        prompt = (args.prompt or "").strip()
        if not prompt:
            return InvokeResult.from_error(
                "UserApprovalTool requires a non-empty 'prompt' string to show the user."
            )
        if long := too_long("UserApprovalTool 'prompt'", prompt, MAX_PROMPT_LENGTH):
            return InvokeResult.from_error(long)
        return _Result(
            prompt=prompt,
            action=(args.action or "").strip() or None,
            details=(args.details or "").strip() or None,
            destructive=bool(args.destructive),
        )
