"""``agent_change_mode``: changes the session's mode after the user agreed (TUL-007)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from aptix.logger import AdminLogger
from aptix.results import InvokeResult
from aptix.sessions.manager import SessionManager
from aptix.tools.args import ToolArgs, ToolResult, function_schema, parse_arguments
from aptix.tools.base import AgentTool
from aptix.tools.context import AgentToolExecutionContext

__all__ = ["ModeChangeTool"]

# The literal messages of TUL-007 §3.4 and §3.6.
EMPTY_ARGUMENTS = "ModeChangeTool requires a non-empty arguments object."
NO_CONTEXT = "ModeChangeTool requires a valid execution context."
NO_SESSION = "ModeChangeTool cannot change mode because the session id is missing."
NO_MODE = "ModeChangeTool requires a non-empty 'mode' string."
NO_BRANCH = "ModeChangeTool requires a 'branch' boolean flag."
NO_REASON = (
    "ModeChangeTool requires a non-empty 'reason' string explaining why the mode change is needed."
)
FAILED = "ModeChangeTool failed to change the session mode."


class _Args(ToolArgs):
    mode: str | None = Field(None, description="Key of the mode to switch the session to.")
    branch: bool | None = Field(
        None,
        description="false: switch this session; true: switch and start the new work as a "
        "new session in that mode.",
    )
    reason: str | None = Field(
        None, description="Short explanation of why this mode fits the user's request."
    )

    @field_validator("branch", mode="before")
    @classmethod
    def _only_a_boolean(cls, value: object) -> object:
        # TUL-007 §3.3 asks for a boolean: "yes", "on", "1" or 1 must not pass as true, so
        # anything else reads as "not supplied" and gets the §3.4 message.
        return value if isinstance(value, bool) else None


class _Result(ToolResult):
    success: bool
    mode: str
    branch: bool
    reason: str
    branched_session_id: str | None = None


class ModeChangeTool(AgentTool):
    """Persists a mode change on the current session; with ``branch`` also opens a child."""

    TOOL_NAME = "agent_change_mode"
    TOOL_USAGE_METADATA = (
        "Use this tool to change the current agent session mode, but only after the user "
        "has explicitly agreed to switch. First, propose a specific target mode and ask "
        "whether the user wants to (1) stay in the current mode, (2) switch this session "
        "to that mode, or (3) switch and start a new session. "
        "Call this tool only for options (2) or (3): use branch=false for switching the "
        "current session, and branch=true when the user wants to switch and start a new session."
    )
    is_fully_executed_on_server = True
    TOOL_ANNOTATIONS: ClassVar[dict[str, Any] | None] = {
        "title": "Change mode",
        "readOnlyHint": False,
        "destructiveHint": False,
        "idempotentHint": False,
        "openWorldHint": False,
    }

    def __init__(self, session_manager: SessionManager, logger: AdminLogger) -> None:
        # TUL-007 §3.2: both dependencies are required and non-null.
        if session_manager is None:
            raise TypeError("ModeChangeTool requires a session manager, not None.")
        if logger is None:
            raise TypeError("ModeChangeTool requires a logger, not None.")
        self._sessions = session_manager
        self._logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """Return the function-tool schema (TUL-007 §5.3 description)."""
        return function_schema(
            cls.TOOL_NAME,
            "Changes the mode for the current agent session to the specified mode string. "
            "Call only after the user confirms a mode change, and provide a short 'reason' "
            "describing why this mode fits the current request. Set branch=true when the user "
            "wants the new work to start as a separate session.",
            _Args,
            required=("mode", "branch", "reason"),
        )

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext | None
    ) -> InvokeResult[str]:
        """Validate, change the mode, and (with ``branch``) create the linked session."""
        if arguments_json is None or not arguments_json.strip():
            return InvokeResult.from_error(EMPTY_ARGUMENTS)
        if context is None:
            return InvokeResult.from_error(NO_CONTEXT)
        ids = context.log_pairs()
        if not context.session_id:
            self._logger.add_error(f"[{self.TOOL_NAME}_ExecuteAsync]", NO_SESSION, *ids)
            return InvokeResult.from_error(NO_SESSION)
        parsed = parse_arguments(_Args, arguments_json)
        if parsed.result is None:
            return InvokeResult(errors=parsed.errors)
        args = parsed.result
        mode = (args.mode or "").strip()
        # The reason is checked trimmed but kept as given: §3.6 echoes the input value.
        reason = args.reason or ""
        if not mode:
            return InvokeResult.from_error(NO_MODE)
        if args.branch is None:
            return InvokeResult.from_error(NO_BRANCH)
        if not reason.strip():
            return InvokeResult.from_error(NO_REASON)
        try:
            # With branch the mode change and the new session are one transaction: a failure
            # leaves the session as it was, so "failed to change the session mode" is true.
            changed = await (
                self._sessions.branch_session if args.branch else self._sessions.set_session_mode
            )(context.session_id, mode, reason, context.org, context.user)
            if changed.result is None:
                return InvokeResult(errors=changed.errors)
            branched_id = changed.result.id if args.branch else None
        except Exception as exc:
            self._logger.add_exception(f"[{self.TOOL_NAME}_ExecuteAsync__Exception]", exc, *ids)
            return InvokeResult.from_error(FAILED)
        result = _Result(
            success=True,
            mode=mode,
            branch=args.branch,
            reason=reason,
            branched_session_id=branched_id,
        )
        return InvokeResult.create(result.model_dump_json(by_alias=True, exclude_none=True))
