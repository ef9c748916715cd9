"""``agent_change_mode``: changes the session's mode after the user agreed (TUL-007)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from aptix.logger import AdminLogger
from aptix.results import InvokeResult
from aptix.sessions.manager import SessionManager
from aptix.tools.args import ToolArgs, ToolResult
from aptix.tools.builtin.base import BuiltinTool, Refusal, hints
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

    def to_json(self) -> str:
        """Serialize with camelCase keys, leaving out ``branchedSessionId`` when not branched."""
        return self.model_dump_json(by_alias=True, exclude_none=True)


class ModeChangeTool(BuiltinTool[_Args, _Result]):
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
    TOOL_ANNOTATIONS = hints("Change mode", read_only=False, destructive=False, idempotent=False)
    FAILURE = FAILED
    # TUL-007 §3.6: whatever the session manager raises is logged and reported as FAILED.
    OUTAGE_IS_A_FAILURE = True

    def __init__(self, session_manager: SessionManager, logger: AdminLogger) -> None:
        # TUL-007 §3.2: both dependencies are required and non-null (the base checks the logger).
        if session_manager is None:
            raise TypeError("ModeChangeTool requires a session manager, not None.")
        super().__init__(logger)
        self._sessions = session_manager

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """Return the function-tool schema (TUL-007 §5.3 description)."""
        return cls.function_schema(
            "Changes the mode for the current agent session to the specified mode string. "
            "Call only after the user confirms a mode change, and provide a short 'reason' "
            "describing why this mode fits the current request. Set branch=true when the user "
            "wants the new work to start as a separate session.",
            required=("mode", "branch", "reason"),
        )

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext | None
    ) -> InvokeResult[str]:
        """Refuse a call without arguments, context or session before parsing (TUL-007 §3.4)."""
        if arguments_json is None or not arguments_json.strip():
            return InvokeResult.from_error(EMPTY_ARGUMENTS)
        if context is None:
            return InvokeResult.from_error(NO_CONTEXT)
        if not context.session_id:
            self._logger.add_error(
                f"[{self.TOOL_NAME}_ExecuteAsync]", NO_SESSION, *context.log_pairs()
            )
            return InvokeResult.from_error(NO_SESSION)
        return await super().execute(arguments_json, context)

    async def run(self, args: _Args, context: AgentToolExecutionContext) -> _Result | Refusal:
        """Change the mode and (with ``branch``) create the linked session."""
        mode = (args.mode or "").strip()
        # The reason is checked trimmed but kept as given: §3.6 echoes the input value.
        reason = args.reason or ""
        if not mode:
            return InvokeResult.from_error(NO_MODE)
        if args.branch is None:
            return InvokeResult.from_error(NO_BRANCH)
        if not reason.strip():
            return InvokeResult.from_error(NO_REASON)
        # With branch the mode change and the new session are one transaction: a failure
        # leaves the session as it was, so "failed to change the session mode" is true.
        assert context.session_id  # execute() refused a call without one
        change = self._sessions.branch_session if args.branch else self._sessions.set_session_mode
        changed = await change(context.session_id, mode, reason, context.org, context.user)
        if changed.result is None:
            return changed
        return _Result(
            success=True,
            mode=mode,
            branch=args.branch,
            reason=reason,
            branched_session_id=changed.result.id if args.branch else None,
        )
