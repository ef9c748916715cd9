"""Wiring the workflow services: catalog, store, authoring and sync (runtime.py adds the tools)."""

from __future__ import annotations

import importlib.util
import logging
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from aptix.errors import ConfigurationError
from aptix.workflows.authoring import WorkflowAuthoring
from aptix.workflows.loader import load_catalog
from aptix.workflows.matching.combined import WorkflowMatcher
from aptix.workflows.registry import WorkflowRegistry
from aptix.workflows.store import InMemoryWorkflowStore, WorkflowStore
from aptix.workflows.sync import WorkflowSync

if TYPE_CHECKING:  # the model runtime is an optional extra
    from aptix.workflows.matching.cascade import Cascade
    from aptix.workflows.matching.stored import StoredEncodings

__all__ = [
    "WorkflowServices",
    "build_matcher",
    "build_workflow_services",
    "semantic_available",
]

#: Matched once at start-up so that the index is built and the model warm before any request.
WARM_UP_MESSAGE = "start a new workflow"

_log = logging.getLogger("aptix.workflows")


def semantic_available() -> bool:
    """True when the ``semantic`` extra is installed (checked without importing it).

    The default model ships inside aptix; only its runtime comes with the extra.
    """
    return all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "tokenizers"))


def build_matcher(
    semantic: bool, cascade: bool | None = None, index_dir: Path | None = None
) -> WorkflowMatcher:
    """A matcher, with the semantic part when asked for and loadable.

    The model loads here, at start-up, with one progress line. A missing or broken model
    package logs one warning and leaves lexical matching in place: it never stops the server.
    ``cascade`` adds the larger encoder (:mod:`.matching.cascade`): ``None`` when its weights
    are installed, ``True`` with a warning when they are not. With ``index_dir``, the
    deployment-wide indexes keep their encodings there between runs
    (:mod:`.matching.stored`).
    """
    if not semantic:
        return WorkflowMatcher()
    from aptix.workflows.matching.semantic import DEFAULT_MODEL, MODELS, SemanticMatcher

    spec = MODELS[DEFAULT_MODEL]
    _log.info("Loading the workflow matching model (%s)...", spec.description)
    started = time.perf_counter()
    try:
        from aptix.workflows.matching.semantic import load_embedder

        embedder = load_embedder(DEFAULT_MODEL)
        embedder.encode([WARM_UP_MESSAGE])
    except Exception as exc:  # any failure of an optional model must not stop the server
        _log.warning(
            "Semantic workflow matching is off, using lexical matching only: %s",
            str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
        )
        return WorkflowMatcher()
    _log.info("Workflow matching model ready in %.2f s.", time.perf_counter() - started)
    larger = None if cascade is False else _cascade(cascade is True, index_dir)
    from aptix.workflows.matching.exiting import until_exit

    # Its index builds stop when the process exits (a Ctrl-C during start-up) rather than
    # abort it from inside onnxruntime.
    return WorkflowMatcher(
        SemanticMatcher(until_exit(embedder), store=_stored(index_dir, DEFAULT_MODEL)),
        cascade=larger,
    )


def _stored(index_dir: Path | None, model: str) -> StoredEncodings | None:
    """Where ``model``'s encodings of the deployment-wide catalog are kept, if anywhere."""
    from aptix.workflows.matching.semantic import MODELS
    from aptix.workflows.matching.stored import StoredEncodings

    return None if index_dir is None else StoredEncodings(index_dir, model, MODELS[model].sha256)


def _cascade(asked: bool, index_dir: Path | None) -> Cascade | None:
    """The larger encoder's cascade when ``routing.json`` has one and its model is installed.

    Unless ``asked``, weights that are not installed turn it off without a warning; weights
    that are installed but fail to load warn either way.
    """
    from aptix.workflows.matching.cascade import Cascade, default_cascade
    from aptix.workflows.matching.semantic import MODELS, installed, load_embedder

    model = default_cascade()
    if model is None:
        return None
    spec = MODELS.get(model.encoder)
    if not asked and spec is not None and not installed(spec):
        _log.info("MiniLM orders every match: the cascade's weights are not installed.")
        return None
    if spec is not None:
        _log.info("Loading the cascade's larger encoder (%s)...", spec.description)
    started = time.perf_counter()
    try:
        embedder = load_embedder(model.encoder)
    except ConfigurationError as exc:
        _log.warning("MiniLM orders every match; the cascade is off: %s", str(exc).splitlines()[0])
        return None
    _log.info("The cascade's larger encoder is ready in %.2f s.", time.perf_counter() - started)
    return Cascade(embedder, model, _stored(index_dir, model.encoder))


@dataclass(frozen=True, slots=True)
class WorkflowServices:
    """The workflow registry, the authoring store and the authoring rules, wired together."""

    registry: WorkflowRegistry
    store: WorkflowStore
    authoring: WorkflowAuthoring
    #: Keeps the registry equal to the store across processes (:mod:`aptix.workflows.sync`).
    sync: WorkflowSync

    def load_files(self, known_tools: Collection[str], folder: Path | None) -> None:
        """Validate and serve the built-in and folder workflows; raises ConfigurationError."""
        loaded = load_catalog(known_tools, folder)
        self.registry.reset(
            [item.manifest for item in loaded],
            sources={item.manifest.workflow_id: item.source for item in loaded},
            known_tools=known_tools,
        )

    def close(self) -> None:
        """Stop the index builds behind the catalog (the owning runtime is closing)."""
        self.registry.matcher.close()

    def warm_up(self) -> None:
        """Build the match index now, so the first request does not pay for it."""
        self.registry.match(WARM_UP_MESSAGE)

    async def load_published(self) -> None:
        """Serve what authoring published; one that no longer validates is left out, warned.

        Unlike the deployment-wide files, a stored revision is one org's: it must not stop
        the deployment, so it is not served until it is fixed (§8.8).
        """
        await self.sync.load()

    async def refresh(self) -> bool:
        """Serve what the store holds now (other processes publish too); True on a change.

        A revision that no longer validates is left out rather than stopping the process.
        """
        return await self.sync.check(force=True)


def build_workflow_services(
    store: WorkflowStore | None = None,
    *,
    semantic: bool = False,
    cascade: bool | None = None,
    index_dir: Path | None = None,
) -> WorkflowServices:
    """Empty services: load them with ``load_files`` once every tool is registered."""
    # The model loads once; each org with workflows of its own gets a matcher sharing it.
    matcher = build_matcher(semantic, cascade, index_dir)
    registry = WorkflowRegistry(matcher=matcher, matcher_factory=matcher.sibling)
    store = store or InMemoryWorkflowStore()
    sync = WorkflowSync(store, registry)
    # Authoring decides on the revision log itself; the throttled check only keeps this
    # process's registry (id spellings, what it serves) as fresh as every request's.
    authoring = WorkflowAuthoring(store, registry, sync=sync.check)
    return WorkflowServices(registry, store, authoring, sync)
