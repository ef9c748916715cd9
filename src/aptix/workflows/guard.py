"""Permitted-tools enforcement while a workflow is active (TUL-006 §7.2, DESIGN §6).

``workflow_guard(registry)`` is a ``CallGuard`` for ``AgentToolExecutor``; the reasoner uses
``offered_tools`` to decide which tool schemas the model sees.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Protocol

from aptix.tool_names import expand_names, matches
from aptix.workflows.registry import WorkflowRegistry
from aptix.workflows.validation import ALWAYS_OFFERED_TOOLS

__all__ = ["offered_tools", "permitted_tools", "workflow_guard"]


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


def permitted_tools(
    registry: WorkflowRegistry, active_workflow_id: str | None, org: str | None = None
) -> frozenset[str]:
    """Tool names allowed while ``org``'s ``active_workflow_id`` runs; empty with none active.

    When the active workflow is no longer served only the always-offered tools remain, so the
    model can still cancel it.
    """
    if not active_workflow_id:
        return frozenset()
    manifest = registry.get(active_workflow_id, org)
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
        return (
            f"Workflow error: the tool '{tool.name}' is not permitted while workflow "
            f"'{active}' is active. Permitted tools: {listed}. Ask the user, or complete or "
            "cancel the workflow with agent_workflow_run before using other tools."
        )

    return guard
