"""Fixtures for the workflow tests: manifests in every state, a registry, a session fake,
an authoring tool over an in-memory store."""

from __future__ import annotations

import dataclasses
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from aptix.results import InvokeResult
from aptix.sessions.manager import Unchecked, workflow_changed_message
from aptix.sessions.models import AgentSession
from aptix.testing import RecordingLogger
from aptix.tools.base import AgentTool
from aptix.tools.builtin.workflow_authoring import WorkflowAuthoringTool
from aptix.tools.context import AgentToolExecutionContext
from aptix.workflows.authoring import WorkflowAuthoring
from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.registry import WorkflowRegistry
from aptix.workflows.store import InMemoryWorkflowStore

KNOWN_TOOLS = (
    "agent_hello_world",
    "agent_calculator",
    "request_user_approval",
    "agent_workflow_registry",
    "agent_workflow_authoring",
    "agent_workflow_run",
)


def make_manifest(workflow_id: str = "create_report", **overrides: Any) -> WorkflowManifest:
    data: dict[str, Any] = {
        "workflowId": workflow_id,
        "title": f"Title of {workflow_id}",
        "description": f"Does {workflow_id.replace('_', ' ')}.",
        "userIntentPatterns": [f"please {workflow_id.replace('_', ' ')}"],
        "instructionText": "1. Ask.\n2. Do.",
        "permittedTools": ["agent_calculator"],
        "completionCriteria": ["The user is satisfied."],
        "followUpOptions": ["Do it again."],
        "version": "1.0.0",
    }
    data.update(overrides)
    return WorkflowManifest.model_validate(data)


@pytest.fixture
def catalog() -> list[WorkflowManifest]:
    """One workflow per visibility/status rule."""
    return [
        make_manifest(
            "create_report",
            userIntentPatterns=["create a sales report", "write the monthly report"],
            allowedTransitions=["summarise_numbers"],
        ),
        make_manifest(
            "summarise_numbers",
            userIntentPatterns=["summarise the numbers", "add up these figures"],
        ),
        make_manifest(
            "beta_forecast",
            visibility="experimental",
            userIntentPatterns=["forecast next quarter revenue"],
        ),
        make_manifest(
            "secret_cleanup",
            visibility="hidden",
            userIntentPatterns=["clean up the secret store"],
            permittedTools=["agent_hello_world"],
        ),
        make_manifest(
            "old_export",
            status="deprecated",
            userIntentPatterns=["export the customer list"],
        ),
        make_manifest(
            "broken_import",
            status="disabled",
            userIntentPatterns=["import the customer list"],
        ),
    ]


@pytest.fixture
def registry(catalog: list[WorkflowManifest]) -> WorkflowRegistry:
    return WorkflowRegistry(
        catalog, known_tools=KNOWN_TOOLS, sources={m.workflow_id: "test" for m in catalog}
    )


class FakeSessionManager:
    """In-memory ``SessionManager``: enough for the workflow run tool."""

    def __init__(self) -> None:
        self.sessions: dict[str, AgentSession] = {}
        self.calls: list[tuple[str, str | None]] = []

    async def create_session(
        self,
        *,
        org: str,
        user: str,
        mode: str | None = None,
        title: str | None = None,
        parent_session_id: str | None = None,
        session_id: str | None = None,
    ) -> InvokeResult[AgentSession]:
        now = datetime.now(UTC)
        session = AgentSession(
            id=session_id or uuid.uuid4().hex,
            org=org,
            user=user,
            title=title,
            mode=mode or "general",
            mode_reason=None,
            mode_set_at=None,
            mode_history=(),
            parent_session_id=parent_session_id,
            active_workflow_id=None,
            created_at=now,
            updated_at=now,
            version=1,
        )
        self.sessions[session.id] = session
        return InvokeResult.create(session)

    async def get_session(self, session_id: str, org: str) -> AgentSession | None:
        session = self.sessions.get(session_id)
        return session if session is not None and session.org == org else None

    async def list_sessions(
        self, org: str, user: str, *, limit: int = 50, offset: int = 0
    ) -> list[AgentSession]:
        return [s for s in self.sessions.values() if s.org == org][offset : offset + limit]

    async def set_session_mode(
        self, session_id: str, mode: str, reason: str, org: str, user: str
    ) -> InvokeResult[AgentSession]:
        raise NotImplementedError

    async def set_active_workflow(
        self,
        session_id: str,
        workflow_id: str | None,
        org: str,
        user: str,
        *,
        expected: str | Unchecked | None = Unchecked.ANY,
    ) -> InvokeResult[AgentSession]:
        session = await self.get_session(session_id, org)
        if session is None:
            return InvokeResult.from_error(f"Session '{session_id}' was not found.")
        if not isinstance(expected, Unchecked) and session.active_workflow_id != expected:
            return InvokeResult.from_error(
                workflow_changed_message(session.active_workflow_id, expected)
            )
        self.calls.append((session_id, workflow_id))
        changed = dataclasses.replace(
            session, active_workflow_id=workflow_id, version=session.version + 1
        )
        self.sessions[session_id] = changed
        return InvokeResult.create(changed)


@pytest.fixture
def sessions() -> FakeSessionManager:
    return FakeSessionManager()


@pytest.fixture
def context() -> Any:
    """An admin of ``acme``: authoring needs the author or admin role."""
    from aptix.tools import AgentToolExecutionContext

    return AgentToolExecutionContext(
        session_id="0123456789abcdef0123456789abcdef",
        conversation_id="conv-1",
        org="acme",
        user="ann",
        role="admin",
    )


@pytest.fixture
def store() -> InMemoryWorkflowStore:
    return InMemoryWorkflowStore()


@pytest.fixture
def tool(
    store: InMemoryWorkflowStore, registry: WorkflowRegistry, logger: RecordingLogger
) -> AgentTool:
    """The authoring tool over ``store`` (modules testing another tool define their own)."""
    return WorkflowAuthoringTool(WorkflowAuthoring(store, registry), logger)


async def succeeded(tool: AgentTool, context: AgentToolExecutionContext, **args: Any) -> Any:
    """``tool``'s result for ``args``, parsed; fails the test when the call failed."""
    outcome = await tool.execute(json.dumps(args), context)
    assert outcome.successful, outcome.error_message
    assert outcome.result is not None
    return json.loads(outcome.result)


#: What makes the ``offsite`` draft complete enough to publish.
OFFSITE_FIELDS = {
    "userIntentPatterns": ["plan a team offsite"],
    "instructionText": "1. Ask for dates.",
    "permittedTools": ["agent_calculator"],
    "completionCriteria": ["Dates agreed."],
}


async def update_offsite(tool: AgentTool, context: AgentToolExecutionContext, fields: Any) -> Any:
    """The parsed result of ``update_workflow`` on ``offsite`` with ``fields``."""
    return await succeeded(
        tool, context, operation="update_workflow", workflowId="offsite", fields=fields
    )


@pytest.fixture
async def published(tool: AgentTool, context: AgentToolExecutionContext) -> None:
    """``offsite`` 0.1.0 published at revision 3."""
    args = {"workflowId": "offsite", "title": "Offsite", "description": "Plans it."}
    assert (await succeeded(tool, context, operation="draft_workflow", **args))["ok"]
    assert (await update_offsite(tool, context, OFFSITE_FIELDS))["ok"]
    assert (await succeeded(tool, context, operation="publish_workflow", workflowId="offsite"))[
        "ok"
    ]
