"""``request_user_approval``: prepares an approval question that the client asks the person."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from aptix.logger import AdminLogger
from aptix.results import InvokeResult
from aptix.tools.args import ToolArgs, ToolResult, function_schema, parse_arguments
from aptix.tools.base import AgentTool
from aptix.tools.context import AgentToolExecutionContext

__all__ = ["UserApprovalTool"]

MAX_PROMPT_LENGTH = 2_000


class _Args(ToolArgs):
    prompt: str | None = Field(None, description="The yes/no question to put to the user.")
    action: str | None = Field(None, description="Short name of the action awaiting approval.")
    details: str | None = Field(None, description="What exactly will happen if approved.")
    destructive: bool | None = Field(
        None, description="True when the action deletes, overwrites or publishes something."
    )


class _Result(ToolResult):
    kind: str = "approval_request"
    prompt: str
    action: str | None
    details: str | None
    destructive: bool
    choices: tuple[str, ...] = ("approve", "reject")
    conversation_id: str | None
    session_id: str | None


class UserApprovalTool(AgentTool):
    """Client-final: the server validates and shapes the request; the client asks the person."""

    TOOL_NAME = "request_user_approval"
    TOOL_USAGE_METADATA = (
        "Call this tool before any irreversible or destructive step (deleting, overwriting, "
        "publishing, modifying user assets) and whenever a workflow requires approval. Show "
        "the exact action in 'prompt' and 'details'. The user's answer comes back as the "
        "tool result; do not proceed unless it approves."
    )
    is_fully_executed_on_server = False
    TOOL_ANNOTATIONS: ClassVar[dict[str, Any] | None] = {
        "title": "Ask the user to approve",
        "readOnlyHint": True,
        "openWorldHint": False,
    }

    def __init__(self, logger: AdminLogger) -> None:
        self._logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """Return the function-tool schema."""
        return function_schema(
            cls.TOOL_NAME,
            "Asks the user to approve or reject an action before it is carried out.",
            _Args,
            required=("prompt",),
        )

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        """Validate the request and return the payload the client will show."""
        parsed = parse_arguments(_Args, arguments_json)
        if parsed.result is None:
            return InvokeResult(errors=parsed.errors)
        args = parsed.result
        prompt = (args.prompt or "").strip()
        if not prompt:
            return InvokeResult.from_error(
                "UserApprovalTool requires a non-empty 'prompt' string to show the user."
            )
        if len(prompt) > MAX_PROMPT_LENGTH:
            return InvokeResult.from_error(
                f"UserApprovalTool 'prompt' is too long ({len(prompt)} characters; "
                f"the limit is {MAX_PROMPT_LENGTH})."
            )
        payload = _Result(
            prompt=prompt,
            action=(args.action or "").strip() or None,
            details=(args.details or "").strip() or None,
            destructive=bool(args.destructive),
            conversation_id=context.conversation_id,
            session_id=context.session_id,
        )
        return InvokeResult.create(payload.to_json())
