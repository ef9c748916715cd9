"""The composition root: builds the logger, the services and the tool registry, wired together."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from aptix.logger import AdminLogger, StdlibAdminLogger
from aptix.settings import AptixSettings
from aptix.tools.builtin.calculator import CalculatorTool
from aptix.tools.builtin.hello_world import HelloWorldTool
from aptix.tools.builtin.user_approval import UserApprovalTool
from aptix.tools.context import AgentToolExecutionContext
from aptix.tools.executor import AgentToolExecutor
from aptix.tools.plugins import register_plugins
from aptix.tools.registry import AgentToolRegistry
from aptix.workflows.guard import workflow_guard
from aptix.workflows.services import (
    WorkflowServices,
    build_workflow_services,
    semantic_available,
)

__all__ = ["Runtime", "build_registry", "build_runtime", "open_runtime"]


@dataclass(frozen=True, slots=True)
class Runtime:
    """The wired application: what the CLI, the HTTP API and MCP all run on."""

    settings: AptixSettings
    logger: AdminLogger
    registry: AgentToolRegistry
    executor: AgentToolExecutor
    workflows: WorkflowServices | None = None

    def tool_context(
        self, *, session_id: str | None = None, org: str = "local", user: str = "local"
    ) -> AgentToolExecutionContext:
        """A context for a tool call made outside a model turn."""
        return AgentToolExecutionContext(session_id=session_id, org=org, user=user)

    async def aclose(self) -> None:
        """Release what the runtime holds (database connections, model clients)."""


def build_registry(logger: AdminLogger, *, plugins: bool = True) -> AgentToolRegistry:
    """Register every built-in tool (and, if asked, the ``aptix.tools`` plugins)."""
    registry = AgentToolRegistry(logger)
    registry.register(HelloWorldTool)
    registry.register(CalculatorTool)
    registry.register(UserApprovalTool)
    if plugins:
        register_plugins(registry)
    return registry


def build_runtime(settings: AptixSettings | None = None) -> Runtime:
    """Build the production runtime from ``settings`` (default: the environment)."""
    settings = settings or AptixSettings()
    logger = StdlibAdminLogger()
    registry = build_registry(logger, plugins=settings.load_plugins)
    workflows = build_workflow_services(semantic=_semantic_matching(settings))
    workflows.register_tools(registry, logger)
    # After every tool is registered: permitted tools are checked against the real registry.
    workflows.load_files(registry.registered_tools, settings.workflows_path)
    executor = AgentToolExecutor(
        registry,
        logger,
        timeout_seconds=settings.tool_timeout_seconds,
        guard=workflow_guard(workflows.registry),
    )
    return Runtime(settings, logger, registry, executor, workflows)


def _semantic_matching(settings: AptixSettings) -> bool:
    if settings.semantic_matching is not None:
        return settings.semantic_matching
    return semantic_available()


@asynccontextmanager
async def open_runtime(settings: AptixSettings | None = None) -> AsyncIterator[Runtime]:
    """Build the runtime for the lifetime of the ``async with`` block and close it after."""
    runtime = build_runtime(settings)
    try:
        if runtime.workflows is not None:
            await runtime.workflows.load_published()
        yield runtime
    finally:
        await runtime.aclose()
