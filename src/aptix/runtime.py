"""The composition root: builds the logger, the services and the tool registry, wired together."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from aptix.db.engine import Database, open_database
from aptix.db.startup import database_at_start
from aptix.errors import ConfigurationError
from aptix.llm.types import LlmClient
from aptix.log_setup import configure_logging
from aptix.logger import AdminLogger, StdlibAdminLogger
from aptix.modes.catalog import (
    ModeCatalog,
    YamlModeCatalog,
    check_mode_tools,
    load_mode_catalog,
)
from aptix.quotas import MeteredModel, Quotas
from aptix.reasoner.caps import ResponseCaps
from aptix.reasoner.context import ContextBudget
from aptix.reasoner.loop import AgentReasoner
from aptix.reasoner.sql_turns import SqlTurnStore
from aptix.reasoner.stopping import TurnTasks
from aptix.reasoner.turns import TurnStore
from aptix.results import InvokeResult
from aptix.sessions.models import AgentSession
from aptix.sessions.sql import SqlSessionManager
from aptix.settings import AptixSettings, load_settings
from aptix.settings_mcp import tool_prefix
from aptix.telemetry import NO_TRACING, Tracing, open_tracing
from aptix.tools.base import AgentTool
from aptix.tools.builtin.calculator import CalculatorTool
from aptix.tools.builtin.change_mode import ModeChangeTool
from aptix.tools.builtin.hello_world import HelloWorldTool
from aptix.tools.builtin.list_modes import ListModesTool
from aptix.tools.builtin.user_approval import UserApprovalTool
from aptix.tools.builtin.workflow_authoring import WorkflowAuthoringTool
from aptix.tools.builtin.workflow_registry import WorkflowRegistryTool
from aptix.tools.builtin.workflow_run import WorkflowRunTool
from aptix.tools.bulkhead import BULKHEADS
from aptix.tools.context import AgentToolExecutionContext, context_for
from aptix.tools.executor import AgentToolExecutor
from aptix.tools.modules import LoadedTool, load_tool_modules, register_tool_modules
from aptix.tools.plugins import register_plugins
from aptix.tools.registry import AgentToolRegistry
from aptix.tools.session_context import session_tool_context
from aptix.tools.traced import tool_executor
from aptix.workflows.active import active_workflow_lines, ended_note, running_manifest
from aptix.workflows.boot import boot_chars, build_boot_message
from aptix.workflows.guard import offered_tools, session_guard
from aptix.workflows.services import (
    WorkflowServices,
    build_workflow_services,
    semantic_available,
)
from aptix.workflows.sql_store import SqlWorkflowStore
from aptix.workflows.sync import WorkflowSync

if TYPE_CHECKING:
    from aptix.tools.mcp_source.source import McpToolSource

__all__ = ["BUILTIN_TOOLS", "Runtime", "Services", "build_registry", "open_runtime"]

#: Every tool that ships with Aptix, in registration order.
BUILTIN_TOOLS: tuple[type[AgentTool], ...] = (
    HelloWorldTool,
    CalculatorTool,
    UserApprovalTool,
    ListModesTool,
    ModeChangeTool,
    WorkflowRegistryTool,
    WorkflowAuthoringTool,
    WorkflowRunTool,
)


@dataclass(frozen=True, slots=True)
class Services:
    """What the built-in tools are constructed with."""

    logger: AdminLogger
    modes: ModeCatalog
    sessions: SqlSessionManager
    workflows: WorkflowServices | None = None


@dataclass(frozen=True, slots=True)
class Runtime:
    """The wired application: what the CLI, the HTTP API and MCP all run on."""

    settings: AptixSettings
    services: Services
    registry: AgentToolRegistry
    executor: AgentToolExecutor
    database: Database
    workflows: WorkflowServices
    turns: TurnStore
    mcp: McpToolSource | None = None
    tracing: Tracing = NO_TRACING
    quotas: Quotas = field(default_factory=Quotas)
    #: The turns running in this process: every reasoner made here registers and stops them.
    turn_tasks: TurnTasks = field(default_factory=TurnTasks)

    @property
    def logger(self) -> AdminLogger:
        """The runtime's logger."""
        return self.services.logger

    def tool_context(
        self, *, org: str = "local", user: str = "local", role: str = "user"
    ) -> AgentToolExecutionContext:
        """A context for a call that names no session (no mode, no active workflow)."""
        return context_for(None, org=org, user=user, role=role)

    async def session_context(
        self, *, org: str, user: str, role: str, session_id: str | None = None
    ) -> AgentToolExecutionContext:
        """The context for a call outside a model turn, from the caller's stored session.

        Raises :class:`~aptix.errors.NotFoundError` when ``session_id`` is not the caller's.
        """
        return await session_tool_context(
            self.services.sessions, org=org, user=user, role=role, session_id=session_id
        )

    async def cancel_workflow(
        self, *, org: str, user: str, role: str, session_id: str
    ) -> InvokeResult[str]:
        """Cancel the session's active workflow on the user's behalf (its id, or why not).

        Raises :class:`~aptix.errors.NotFoundError` when ``session_id`` is not the caller's.
        """
        context = await self.session_context(org=org, user=user, role=role, session_id=session_id)
        active = context.active_workflow_id
        if not active:
            return InvokeResult.from_error("The session has no active workflow.")
        arguments = {
            "operation": "cancel_workflow",
            "workflowId": active,
            "reason": "Cancelled by the user.",
        }
        outcome = await self.executor.invoke("agent_workflow_run", json.dumps(arguments), context)
        if outcome.result is None:
            return InvokeResult.from_error(
                outcome.error_message or "The workflow could not be cancelled."
            )
        return InvokeResult.create(active)

    def metered(self, model: LlmClient, context: ContextBudget | None = None) -> MeteredModel:
        """``model`` on the caller's org's token budget: each call held, then recorded.

        A call cut short is charged as ``context`` counts its request and the text it sent.
        """
        counts = context or ContextBudget(self.settings.llm_context_tokens)
        return MeteredModel(
            model,
            self.quotas,
            prompt_tokens=lambda request: counts.request_tokens(request.messages, request.tools),
            text_tokens=counts.counter.count,
        )

    def reasoner(self, model: LlmClient | None = None) -> AgentReasoner:
        """The agent loop on ``model`` (default: the configured OpenAI-compatible endpoint)."""
        registry = self.workflows.registry
        boot_room = boot_chars(self.settings.llm_context_tokens)
        context = ContextBudget(
            self.settings.llm_context_tokens, strategy=self.settings.context_strategy
        )
        reasoner = AgentReasoner(
            model=self.metered(model or self.default_model(), context),
            executor=self.executor,
            sessions=self.services.sessions,
            modes=self.services.modes,
            turns=self.turns,
            logger=self.logger,
            boot_message=lambda org: build_boot_message(registry, org, max_chars=boot_room),
            active_workflow=lambda workflow, org: active_workflow_lines(registry, workflow, org),
            offered_tools=lambda workflow, tools, org: offered_tools(
                registry, workflow, tools, self.registry.registered_tools, org
            ),
            max_iterations=self.settings.max_iterations,
            token_budget=self.settings.turn_token_budget,
            lease_seconds=self.settings.turn_lease_seconds,
            history_turns=self.settings.history_turns,
            caps=ResponseCaps(
                self.settings.max_tool_calls_per_response, self.settings.max_model_text_chars
            ),
            context=context,
            tracing=self.tracing,
            # Each step offers the workflows' tools: on a copy it could confirm, or not at all.
            refresh_workflows=self.workflows.sync.confirm,
            running=self.turn_tasks,
            release_workflow=self._release_unserved_workflow,
        )
        for warning in reasoner.crowded_modes():  # each of its turns would fail: say so now
            _warn_once(warning, "aptix.reasoner")
        return reasoner

    async def _release_unserved_workflow(
        self, session: AgentSession
    ) -> tuple[AgentSession, str | None]:
        """Clear an active workflow that is no longer served, or disabled, with a note why.

        Not served: removed, or no longer valid; disabled: stopped by an admin. Kept, its
        rules would be neither applied nor shown: the guard allows only the always-offered
        tools, and the model could not read the workflow. The note tells the model why.
        """
        active, registry = session.active_workflow_id, self.workflows.registry
        if not active or running_manifest(registry, active, session.org) is not None:
            return session, None
        # Published or enabled by another process since this one last looked? Then it runs.
        await self.workflows.sync.check(force=True)
        if running_manifest(registry, active, session.org) is not None:
            return session, None
        sessions = self.services.sessions
        # Only if it is still the one decided on: a workflow started meanwhile stays.
        cleared = await sessions.set_active_workflow(
            session.id, None, session.org, session.user, expected=active
        )
        if cleared.result is None:
            return await sessions.get_session(session.id, session.org) or session, None
        return cleared.result, ended_note(active, registry.get(active, session.org))

    def default_model(self) -> LlmClient:
        """The configured model client; :class:`ConfigurationError` when none is configured.

        ``APTIX_LLM_MODEL=demo`` without an endpoint is the built-in demo model.
        """
        settings = self.settings
        if not settings.model_configured or settings.llm_model is None:
            raise ConfigurationError(
                "No model is configured.",
                hint="set APTIX_LLM_MODEL (and APTIX_LLM_BASE_URL and APTIX_LLM_API_KEY for an "
                "endpoint other than OpenAI's; docs/providers.md has examples)",
            )
        from aptix.llm.demo import DemoModel, is_demo

        if is_demo(settings.llm_model, settings.llm_base_url):
            return DemoModel()
        from aptix.llm.openai_client import OpenAiLlmClient

        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
        return OpenAiLlmClient(
            base_url=settings.llm_base_url,
            api_key=key,
            model=settings.llm_model,
            api=settings.llm_api,
            timeout_seconds=settings.llm_timeout_seconds,
            max_retries=settings.llm_max_retries,
            temperature=settings.llm_temperature,
            max_output_tokens=settings.llm_max_output_tokens,
            extra_headers=settings.llm_extra_headers,
        )

    async def aclose(self) -> None:
        """Release what the runtime holds (MCP sessions, database connections, model clients)."""
        self.workflows.close()
        if self.mcp is not None:
            await self.mcp.aclose()
        await self.database.close()
        await self.quotas.aclose()
        if self.tracing.enabled:  # exporting what is buffered may wait on the network
            await asyncio.to_thread(self.tracing.shutdown)


def build_registry(
    services: Services, *, plugins: bool = True, from_files: Iterable[LoadedTool] = ()
) -> AgentToolRegistry:
    """Register every built-in tool with its services (and, if asked, the plugins).

    ``from_files`` are the tools :func:`~aptix.tools.modules.load_tool_modules` found.
    """
    logger = services.logger
    registry = AgentToolRegistry(logger)
    registry.register(HelloWorldTool)
    registry.register(CalculatorTool)
    registry.register(UserApprovalTool)
    registry.register(ListModesTool, lambda: ListModesTool(services.modes, logger))
    registry.register(ModeChangeTool, lambda: ModeChangeTool(services.sessions, logger))
    workflows = services.workflows
    if workflows is not None:
        # The composition root builds the workflow tools: workflows/ never imports tools/.
        registry.register(
            WorkflowRegistryTool, lambda: WorkflowRegistryTool(workflows.registry, logger)
        )
        registry.register(
            WorkflowAuthoringTool, lambda: WorkflowAuthoringTool(workflows.authoring, logger)
        )
        registry.register(
            WorkflowRunTool,
            lambda: WorkflowRunTool(workflows.registry, services.sessions, logger),
        )
    if plugins:
        register_plugins(registry)
    register_tool_modules(registry, from_files)
    registry.build_all()  # a constructor that fails stops start-up, naming the tool
    return registry


def _offer_outside_tools(
    modes: YamlModeCatalog, settings: AptixSettings, from_files: Iterable[LoadedTool]
) -> None:
    """Tools from files in the default mode; each MCP server's in its ``modes`` (or the default)."""
    for loaded in from_files:
        modes.offer([loaded.tool_cls.TOOL_NAME], source=loaded.source)
    for name, config in settings.mcp_servers.items():
        if config.enabled:
            pattern = f"{tool_prefix(name, config)}_*"
            modes.offer([pattern], config.modes, source=f"MCP server '{name}' (its 'modes')")


def workflows_before_call(
    sync: WorkflowSync,
) -> Callable[[AgentToolExecutionContext], Awaitable[bool]]:
    """What the executor awaits before each call: the workflows as stored, for its decision.

    A call in a session is decided on them (its permission under the active workflow, a
    ``start_workflow``): on a copy read within one interval, or it fails unrun as a database
    outage (503 over HTTP), never on a copy that could not be read again. A call without a
    session has no workflow to answer to: the throttled check, which never fails it.
    """

    async def before_call(context: AgentToolExecutionContext) -> bool:
        if context.session_id:
            return await sync.confirm()
        return await sync.check()

    return before_call


def quotas_for(settings: AptixSettings) -> Quotas:
    """The deployment's limits, counted in Redis when ``APTIX_REDIS_URL`` is set."""
    redis = settings.redis_url.get_secret_value() if settings.redis_url else None
    return Quotas(
        rate_limit=settings.rate_limit,
        max_concurrent_turns=settings.max_concurrent_turns,
        token_budget=settings.token_budget,
        redis_url=redis or None,
        key_prefix=settings.redis_key_prefix,
        fail_open=settings.limits_when_redis_down == "open",
    )


#: Start-up warnings already given: ``aptix serve`` opens a runtime to check the
#: configuration, then the one it serves with, and an operator is told once.
_WARNED: set[str] = set()


def _warn_once(message: str, logger: str = "aptix.workflows") -> None:
    """Warn of a setting that does nothing, once per process (as a cascade without weights)."""
    if message not in _WARNED:
        _WARNED.add(message)
        logging.getLogger(logger).warning("%s", message)


def _semantic_matching(settings: AptixSettings) -> bool:
    if settings.semantic_matching is not None:
        return settings.semantic_matching
    return semantic_available()


@asynccontextmanager
async def open_runtime(
    settings: AptixSettings | None = None,
    *,
    tracing: Tracing | None = None,
    connect_mcp: bool = True,
) -> AsyncIterator[Runtime]:
    """Build the runtime for the ``async with`` block: database, catalogs, tools; close after.

    ``tracing`` replaces what ``APTIX_OTEL`` chooses (an application's own tracer provider,
    a test's in-memory exporter: ``OtelTracing(provider)``). ``connect_mcp=False`` checks the
    MCP servers' configuration but neither starts nor contacts them (their tools are then
    not registered): for a check of the configuration before serving.

    Any configuration problem raises :class:`~aptix.errors.ConfigurationError` before the
    block runs, with a message naming the setting, file or tool at fault.
    """
    settings = settings or load_settings()
    configure_logging(settings.log_level, json_lines=settings.log_json)
    BULKHEADS.configure(settings.tool_threads)
    logger = StdlibAdminLogger()
    tracing = tracing or open_tracing(settings)
    modes = load_mode_catalog(settings.modes_path)
    database = await open_database(settings.effective_database_url)
    mcp: McpToolSource | None = None
    workflows: WorkflowServices | None = None
    if settings.mcp_servers:
        # The MCP SDK takes a third of the import time: only a runtime with servers loads it.
        from aptix.tools.mcp_source.source import McpToolSource

        mcp = McpToolSource(settings.mcp_servers, logger)
    try:
        workflows = build_workflow_services(
            SqlWorkflowStore(database),
            semantic=_semantic_matching(settings),
            cascade=settings.match_cascade,
            # A restart reads the catalog's encodings instead of running the models again.
            index_dir=settings.data_dir / "index",
        )
        services = Services(logger, modes, SqlSessionManager(database, modes), workflows)
        from_files = load_tool_modules(settings.tool_modules)
        registry = build_registry(services, plugins=settings.load_plugins, from_files=from_files)
        if mcp is not None:  # so that `<prefix>_*` names exactly the server's own tools
            mcp.check_prefixes(registry.registered_tools)
        _offer_outside_tools(modes, settings, from_files)
        if mcp is not None and connect_mcp:
            await mcp.start(registry)
        # A server that is down still lends its `<prefix>_*` to modes and workflows.
        known = [*registry.registered_tools, *(mcp.patterns if mcp else ())]
        check_mode_tools(modes, known)
        # After every tool is registered: permitted tools are checked against the real registry.
        workflows.load_files(known, settings.workflows_path)
        await workflows.load_published()
        workflows.warm_up()
        executor = tool_executor(
            tracing,
            registry,
            logger,
            timeout_seconds=settings.tool_timeout_seconds,
            timeouts=mcp.tool_timeouts() if mcp else None,
            max_result_bytes=settings.tool_max_result_bytes,
            guard=session_guard(
                workflows.registry, modes.tools_for_mode, lambda: registry.registered_tools
            ),
            # Each call decides on the workflows as stored, not as this request found them.
            before_call=workflows_before_call(workflows.sync),
        )
        if mcp is not None:  # tools of a server that comes up later get their limits too
            mcp.on_timeout = executor.set_timeout
        turns = SqlTurnStore(database)
        # Its writes are the first: a role that may only read ends the start-up here.
        with database_at_start(settings.effective_database_url):
            await turns.sweep()  # turns left running by a process that died are interrupted
        runtime = Runtime(
            settings,
            services,
            registry,
            executor,
            database,
            workflows,
            turns,
            mcp,
            tracing,
            quotas_for(settings),
        )
        await runtime.quotas.check()  # a Redis that refuses the URL's database stops start-up
        if settings.match_arbiter != "off" and not settings.model_configured:
            _warn_once(
                f"APTIX_MATCH_ARBITER={settings.match_arbiter} is off: no model is configured "
                "(set APTIX_LLM_MODEL, and APTIX_LLM_BASE_URL for a server of your own); the "
                "ranker and the gate decide alone."
            )
        elif settings.match_arbiter != "off":
            from aptix.reasoner.arbiter_model import LlmArbiterModel
            from aptix.workflows.matching.arbiter import MatchArbiter

            workflows.registry.arbiter = MatchArbiter(
                # Metered like the reasoner's model: the arbiter spends the caller's org's
                # budget; refused, it fails like any model error and the ranker's choice stands.
                LlmArbiterModel(runtime.metered(runtime.default_model())),
                settings.match_arbiter,
                timeout=min(settings.llm_timeout_seconds, 10.0),
            )
    except BaseException:
        if workflows is not None:
            workflows.close()
        if mcp is not None:
            await mcp.aclose()
        await database.close()
        tracing.shutdown()
        raise
    try:
        yield runtime
    finally:
        await runtime.aclose()
