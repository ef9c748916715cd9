"""TUL-007 §6 for agent_change_mode, plus branching and isolation against the real store."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from aptix import AgentToolRegistry, InvokeResult
from aptix.runtime import Runtime
from aptix.testing import RecordingLogger
from aptix.tools import AgentToolExecutionContext
from aptix.tools.builtin.change_mode import ModeChangeTool

VALID = {"mode": "calculation", "branch": False, "reason": "The user wants exact numbers."}


@dataclass
class FakeSessions:
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    error: Exception | None = None
    refusal: str | None = None

    async def set_session_mode(
        self, session_id: str, mode: str, reason: str, org: str, user: str
    ) -> InvokeResult[object]:
        self.calls.append((session_id, mode, reason, org, user))
        if self.error:
            raise self.error
        if self.refusal:
            return InvokeResult.from_error(self.refusal)
        return InvokeResult.create(object())

    async def branch_session(
        self, session_id: str, mode: str, reason: str, org: str, user: str
    ) -> InvokeResult[object]:
        changed = await self.set_session_mode(session_id, mode, reason, org, user)
        if changed.result is None:
            return changed
        create = self.create_session  # type: ignore[attr-defined]
        child: InvokeResult[object] = await create(
            org=org, user=user, mode=mode, parent_session_id=session_id
        )
        return child


def _tool(sessions: FakeSessions, logger: RecordingLogger) -> ModeChangeTool:
    return ModeChangeTool(sessions, logger)  # type: ignore[arg-type]


def test_registers_with_the_tul007_metadata_and_schema(logger: RecordingLogger) -> None:
    registry = AgentToolRegistry(logger)
    registry.register(ModeChangeTool, lambda: _tool(FakeSessions(), logger))
    schema = ModeChangeTool.schema()
    assert schema["name"] == "agent_change_mode"
    assert schema["description"].startswith(
        "Changes the mode for the current agent session to the specified mode string."
    )
    assert schema["parameters"]["required"] == ["mode", "branch", "reason"]
    props = schema["parameters"]["properties"]
    assert (props["mode"]["type"], props["branch"]["type"], props["reason"]["type"]) == (
        "string",
        "boolean",
        "string",
    )
    assert "sessionId" not in props
    assert ModeChangeTool.TOOL_USAGE_METADATA.startswith(
        "Use this tool to change the current agent session mode, but only after the user "
        "has explicitly agreed to switch."
    )
    assert ModeChangeTool.is_fully_executed_on_server is True


@pytest.mark.parametrize("branch", [False, True])
async def test_happy_path_calls_the_manager_once_and_echoes_the_inputs(
    logger: RecordingLogger, context: AgentToolExecutionContext, branch: bool
) -> None:
    sessions = FakeSessions()

    async def create_session(**kwargs: Any) -> InvokeResult[Any]:
        sessions.calls.append(("create", kwargs))

        class Child:
            id = "d" * 32

        return InvokeResult.create(Child())

    sessions.create_session = create_session  # type: ignore[attr-defined]
    outcome = await _tool(sessions, logger).execute(
        json.dumps({**VALID, "branch": branch}), context
    )
    assert outcome.successful, outcome.error_message
    assert sessions.calls[0] == (
        context.session_id,
        "calculation",
        "The user wants exact numbers.",
        "acme",
        "ann",
    )
    payload = json.loads(outcome.result or "")
    assert payload["success"] is True
    assert payload["mode"] == "calculation"
    assert payload["branch"] is branch
    assert payload["reason"] == "The user wants exact numbers."
    if branch:
        assert payload["branchedSessionId"] == "d" * 32
        assert sessions.calls[1] == (
            "create",
            {
                "org": "acme",
                "user": "ann",
                "mode": "calculation",
                "parent_session_id": context.session_id,
            },
        )
    else:
        assert "branchedSessionId" not in payload
        assert len(sessions.calls) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"branch": False, "reason": "r"}, "ModeChangeTool requires a non-empty 'mode' string."),
        ({**VALID, "mode": ""}, "ModeChangeTool requires a non-empty 'mode' string."),
        ({**VALID, "mode": "   "}, "ModeChangeTool requires a non-empty 'mode' string."),
        ({**VALID, "mode": None}, "ModeChangeTool requires a non-empty 'mode' string."),
        ({"mode": "m", "reason": "r"}, "ModeChangeTool requires a 'branch' boolean flag."),
        ({**VALID, "branch": None}, "ModeChangeTool requires a 'branch' boolean flag."),
        (
            {"mode": "m", "branch": True},
            "ModeChangeTool requires a non-empty 'reason' string explaining why the mode "
            "change is needed.",
        ),
        (
            {**VALID, "reason": " "},
            "ModeChangeTool requires a non-empty 'reason' string explaining why the mode "
            "change is needed.",
        ),
    ],
)
async def test_validation_failures_use_the_literal_messages_and_never_call_the_manager(
    logger: RecordingLogger,
    context: AgentToolExecutionContext,
    args: dict[str, Any],
    message: str,
) -> None:
    sessions = FakeSessions()
    outcome = await _tool(sessions, logger).execute(json.dumps(args), context)
    assert not outcome.successful
    assert outcome.error_message == message
    assert sessions.calls == []


@pytest.mark.parametrize("branch", ["yes", "on", "1", "true", 1, 0, "no"])
async def test_branch_must_be_a_real_boolean(
    logger: RecordingLogger, context: AgentToolExecutionContext, branch: object
) -> None:
    sessions = FakeSessions()
    outcome = await _tool(sessions, logger).execute(
        json.dumps({**VALID, "branch": branch}), context
    )
    assert outcome.error_message == "ModeChangeTool requires a 'branch' boolean flag."
    assert sessions.calls == []


async def test_reason_is_echoed_as_given_not_trimmed(
    logger: RecordingLogger, context: AgentToolExecutionContext
) -> None:
    sessions = FakeSessions()
    reason = "  The user wants exact numbers.\n"
    outcome = await _tool(sessions, logger).execute(
        json.dumps({**VALID, "reason": reason}), context
    )
    assert json.loads(outcome.result or "")["reason"] == reason
    assert sessions.calls[0][2] == reason


@pytest.mark.parametrize(("manager", "with_logger"), [(None, True), (FakeSessions(), False)])
def test_construction_refuses_missing_dependencies(
    logger: RecordingLogger, manager: FakeSessions | None, with_logger: bool
) -> None:
    with pytest.raises(TypeError, match="ModeChangeTool requires a"):
        ModeChangeTool(manager, logger if with_logger else None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ModeChangeTool(None, None)  # type: ignore[arg-type]


@pytest.mark.parametrize("args", ["", "   ", "\n\t", None])
async def test_null_or_whitespace_arguments_are_refused(
    logger: RecordingLogger, context: AgentToolExecutionContext, args: str | None
) -> None:
    sessions = FakeSessions()
    outcome = await _tool(sessions, logger).execute(args, context)  # type: ignore[arg-type]
    assert outcome.error_message == "ModeChangeTool requires a non-empty arguments object."
    assert sessions.calls == []


async def test_missing_context_is_refused(logger: RecordingLogger) -> None:
    sessions = FakeSessions()
    outcome = await _tool(sessions, logger).execute(json.dumps(VALID), None)
    assert outcome.error_message == "ModeChangeTool requires a valid execution context."
    assert sessions.calls == []


@pytest.mark.parametrize("session_id", [None, ""])
async def test_missing_session_id_is_logged_and_refused(
    logger: RecordingLogger, session_id: str | None
) -> None:
    sessions = FakeSessions()
    context = AgentToolExecutionContext(session_id=session_id, org="acme", user="ann")
    outcome = await _tool(sessions, logger).execute(json.dumps(VALID), context)
    assert outcome.error_message == (
        "ModeChangeTool cannot change mode because the session id is missing."
    )
    assert len(logger.of_kind("error")) == 1
    assert sessions.calls == []


async def test_session_id_in_arguments_is_ignored(
    logger: RecordingLogger, context: AgentToolExecutionContext
) -> None:
    sessions = FakeSessions()
    args = {**VALID, "sessionId": "e" * 32, "org": "evil", "user": "mallory"}
    await _tool(sessions, logger).execute(json.dumps(args), context)
    assert sessions.calls[0][0] == context.session_id
    assert sessions.calls[0][3:] == ("acme", "ann")


async def test_exception_from_the_manager_is_logged_and_reported(
    logger: RecordingLogger, context: AgentToolExecutionContext
) -> None:
    sessions = FakeSessions(error=ConnectionError("db down"))
    outcome = await _tool(sessions, logger).execute(json.dumps(VALID), context)
    assert outcome.error_message == "ModeChangeTool failed to change the session mode."
    [record] = logger.of_kind("exception")
    assert record.tag == "[agent_change_mode_ExecuteAsync__Exception]"
    assert isinstance(record.exception, ConnectionError)


async def test_manager_refusal_is_returned_as_failure(
    logger: RecordingLogger, context: AgentToolExecutionContext
) -> None:
    sessions = FakeSessions(refusal="Unknown mode 'x'. Valid modes: general.")
    outcome = await _tool(sessions, logger).execute(json.dumps(VALID), context)
    assert outcome.error_message == "Unknown mode 'x'. Valid modes: general."


async def _session(runtime: Runtime, org: str = "acme") -> str:
    created = await runtime.services.sessions.create_session(org=org, user="ann")
    assert created.result is not None
    return created.result.id


async def test_unknown_mode_key_is_refused_by_the_real_store(runtime: Runtime) -> None:
    session_id = await _session(runtime)
    context = AgentToolExecutionContext(session_id=session_id, org="acme", user="ann")
    outcome = await runtime.executor.invoke(
        "agent_change_mode", json.dumps({**VALID, "mode": "astrology"}), context
    )
    assert outcome.error_message == (
        "Unknown mode 'astrology'. Valid modes: general, workflow_authoring, calculation."
    )


async def test_branch_creates_exactly_one_linked_session_in_the_target_mode(
    runtime: Runtime,
) -> None:
    sessions = runtime.services.sessions
    session_id = await _session(runtime)
    context = AgentToolExecutionContext(session_id=session_id, org="acme", user="ann")
    args = {"mode": "workflow_authoring", "branch": True, "reason": "user asked"}
    outcome = await runtime.executor.invoke("agent_change_mode", json.dumps(args), context)
    payload = json.loads(outcome.result or "")
    children = await sessions.list_children(session_id, "acme")
    assert [c.id for c in children] == [payload["branchedSessionId"]]
    child = children[0]
    assert (child.mode, child.parent_session_id, child.org, child.user) == (
        "workflow_authoring",
        session_id,
        "acme",
        "ann",
    )
    parent = await sessions.get_session(session_id, "acme")
    assert parent is not None
    assert parent.mode == "workflow_authoring"
    assert [(h.previous_mode, h.mode) for h in parent.mode_history] == [
        ("general", "workflow_authoring")
    ]
    assert len(await sessions.list_sessions("acme", "ann")) == 2


async def test_another_org_cannot_change_the_session_through_the_tool(runtime: Runtime) -> None:
    session_id = await _session(runtime, org="acme")
    intruder = AgentToolExecutionContext(session_id=session_id, org="globex", user="eve")
    outcome = await runtime.executor.invoke("agent_change_mode", json.dumps(VALID), intruder)
    assert outcome.error_message == f"Unknown session '{session_id}'."
    session = await runtime.services.sessions.get_session(session_id, "acme")
    assert session is not None
    assert (session.mode, session.mode_history) == ("general", ())
