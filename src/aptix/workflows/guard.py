"""What a session may call: its mode's tools, narrowed by its active workflow (DESIGN §5, §6).

``session_guard`` is THE ``CallGuard`` of ``AgentToolExecutor``: every surface that names a
session (a model turn, HTTP invoke, the CLI, MCP) reaches it through the executor, so a tool
outside the session's mode, or outside its active workflow's ``permittedTools``, is refused
alike everywhere, with the same message a model turn gives (:func:`not_offered_message`, the
workflow error). The reasoner uses ``offered_tools`` to decide which schemas the model sees.
A call that names no session has no mode and no workflow, and is not narrowed here.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Protocol

from aptix.errors import NotFoundError
from aptix.tool_names import expand_names, matches
from aptix.workflows.active import running_manifest
from aptix.workflows.registry import WorkflowRegistry
from aptix.workflows.validation import ALWAYS_OFFERED_TOOLS

__all__ = [
    "not_offered_message",
    "offered_tools",
    "permitted_tools",
    "session_guard",
    "workflow_guard",
]


def not_offered_message(name: str) -> str:
    """The refusal of a tool the session's mode (or workflow) does not offer."""
    return f"The tool '{name}' is not offered in this mode or workflow."


class _Tool(Protocol):
    """What the guard reads of a tool (``AgentTool`` has it)."""

    @property
    def name(self) -> str: ...


class _Call(Protocol):
    """What the guard reads of a call's context (``AgentToolExecutionContext`` has it)."""

    @property
    def active_workflow_id(self) -> str | None: ...

    @property
    def org(self) -> str: ...

    @property
    def mode(self) -> str | None: ...


def permitted_tools(
    registry: WorkflowRegistry, active_workflow_id: str | None, org: str | None = None
) -> frozenset[str]:
    """Tool names allowed while ``org``'s ``active_workflow_id`` runs; empty with none active.

    When the active workflow is no longer served, or no longer runnable (disabled), only the
    always-offered tools remain, so it can still be cancelled; the session's next model turn
    ends it (``Runtime``).
    """
    if not active_workflow_id:
        return frozenset()
    manifest = running_manifest(registry, active_workflow_id, org)
    extra = manifest.permitted_tools if manifest is not None else ()
    return ALWAYS_OFFERED_TOOLS | frozenset(extra)


def offered_tools(
    registry: WorkflowRegistry,
    active_workflow_id: str | None,
    mode_tools: Collection[str],
    registered: Collection[str] = (),
    org: str | None = None,
) -> list[str]:
    """The tools to offer the model: the mode's, narrowed by the active workflow if any.

    ``<prefix>_*`` patterns, in the mode or the workflow, stand for the ``registered`` tools
    they match.
    """
    mode_tools = expand_names(mode_tools, registered)
    if not active_workflow_id:
        return list(mode_tools)
    permitted = permitted_tools(registry, active_workflow_id, org)
    offered = [t for t in mode_tools if any(matches(t, p) for p in permitted)]
    # A workflow's permitted tools are offered even if the mode does not list them.
    seen = {t.casefold() for t in offered}
    extra = sorted(t for t in expand_names(permitted, registered) if t.casefold() not in seen)
    return offered + extra


def workflow_guard(registry: WorkflowRegistry) -> Callable[[_Tool, _Call], str | None]:
    """A guard refusing calls to tools the active workflow does not permit.

    It is the executor's ``CallGuard``; typed by what it reads so that workflows/ need not
    import tools/.
    """

    def guard(tool: _Tool, context: _Call) -> str | None:
        active = context.active_workflow_id
        if not active:
            return None
        allowed = permitted_tools(registry, active, context.org)
        if any(matches(tool.name, t) for t in allowed):
            return None
        listed = ", ".join(sorted(allowed))
        if running_manifest(registry, active, context.org) is None:
            return (
                f"Workflow error: the tool '{tool.name}' is not permitted: workflow '{active}' "
                "is still active in this session but is disabled or no longer served, so it "
                f"grants nothing more than {listed}. The session's next turn ends it, or "
                "cancel it with agent_workflow_run."
            )
        return (
            f"Workflow error: the tool '{tool.name}' is not permitted while workflow "
            f"'{active}' is active. Permitted tools: {listed}. Ask the user, or complete or "
            "cancel the workflow with agent_workflow_run before using other tools."
        )

    return guard


def session_guard(
    registry: WorkflowRegistry,
    mode_tools: Callable[[str], Collection[str]],
    registered: Callable[[], Collection[str]],
) -> Callable[[_Tool, _Call], str | None]:
    """A guard refusing what the session's active workflow, or else its mode, does not offer.

    ``mode_tools(key)`` lists a mode's tools (always-offered ones included); ``registered()``
    the registered tool names its ``<prefix>_*`` patterns expand to.
    """
    workflow = workflow_guard(registry)

    def guard(tool: _Tool, context: _Call) -> str | None:
        if context.active_workflow_id:
            return workflow(tool, context)  # the workflow's permittedTools extend the mode
        if context.mode is None:
            return None
        try:
            tools = mode_tools(context.mode)
        except NotFoundError:  # a mode the catalog no longer has: only what is always offered
            tools = ALWAYS_OFFERED_TOOLS
        offered = offered_tools(registry, None, tools, registered())
        if any(matches(tool.name, t) for t in offered):
            return None
        return not_offered_message(tool.name)

    return guard
