"""``WorkflowSync``: one workflow registry across every process on the same database.

Each process serves authored workflows from memory. Every authoring change appends a
revision and bumps the store's change counter in one transaction; :meth:`WorkflowSync.check`
compares that counter with the value this process last loaded and reloads the published
workflows when it moved.

* Every request checks (the HTTP app, ``/mcp``, MCP over stdio, each model turn), and so
  does every decision taken inside one: each tool call before it is guarded or run (a
  workflow start included), and each step of a model turn. At most once per
  :data:`SYNC_INTERVAL` per process: one primary-key read, and a reload only after a change.
* Authoring checks too (throttled alike), but decides on the revision log it reads, never on
  this copy, and writes with a compare-and-set (:mod:`aptix.workflows.revisions`).

So a change committed by one process governs every decision another process takes
:data:`SYNC_INTERVAL` (0.5 s) or more after the commit, in requests and turns that began
before it too: the last check either came after the commit and saw it, or is old enough to
be repeated. A turn running for minutes on a process that serves nothing else stops being
granted a disabled workflow's tools within that bound.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from aptix.workflows.loader import ManifestProblem
from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.registry import WorkflowRegistry
from aptix.workflows.store import WorkflowStore, served_revision
from aptix.workflows.validation import validate_manifest

__all__ = ["SYNC_INTERVAL", "WorkflowSync", "left_out", "read_published"]

#: Seconds between two checks of the change counter by one process.
SYNC_INTERVAL = 0.5
STORE_SOURCE = "store"

_log = logging.getLogger("aptix.workflows")

Authored = dict[str, dict[str, WorkflowManifest]]


async def read_published(
    store: WorkflowStore, registry: WorkflowRegistry
) -> tuple[Authored, list[ManifestProblem]]:
    """What the store serves, per org, and the revisions that no longer validate."""
    authored: Authored = {}
    problems: list[ManifestProblem] = []
    for org in await store.orgs():
        for wid in await store.workflow_ids(org):
            served = served_revision(await store.history(wid, org))
            if served is None or registry.is_deployment_wide(wid):
                continue
            found = validate_manifest(served.manifest, registry.known_tools)
            source = f"{STORE_SOURCE} (org {org}) revision {served.revision}"
            problems += [ManifestProblem(source, wid, p.field, p.message) for p in found]
            if not found:
                authored.setdefault(org, {})[wid] = served.manifest
    return authored, problems


def left_out(problems: list[ManifestProblem]) -> list[str]:
    """One sentence per stored revision ``problems`` keep from being served."""
    grouped: dict[tuple[str, str | None], list[str]] = {}
    for problem in problems:
        where = f"{problem.field}: " if problem.field else ""
        grouped.setdefault((problem.source, problem.workflow_id), []).append(
            where + problem.message.rstrip(".")
        )
    return [
        f"Workflow '{wid}' from {source} no longer validates and is not served: "
        f"{'; '.join(found)} (run `aptix workflows validate`)."
        for (source, wid), found in grouped.items()
    ]


class WorkflowSync:
    """Keeps ``registry``'s authored workflows equal to what ``store`` serves."""

    def __init__(
        self,
        store: WorkflowStore,
        registry: WorkflowRegistry,
        *,
        interval: float = SYNC_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._registry = registry
        self._interval = interval
        self._clock = clock
        self._lock = asyncio.Lock()
        self._checked_at: float | None = None
        self._loaded: int | None = None
        self._failing = False
        #: Each left-out revision is warned about once, not at every reload.
        self._warned: set[str] = set()

    @property
    def interval(self) -> float:
        """Seconds between two throttled checks."""
        return self._interval

    async def load(self) -> list[ManifestProblem]:
        """Serve what the store holds now; the revisions that no longer validate are returned.

        Those are left out of the registry with a warning, and the rest is served: one org's
        stale workflow (a tool since removed, a limit since added) stops nobody.
        """
        async with self._lock:
            return await self._load()

    async def check(self, *, force: bool = False) -> bool:
        """Reload when the store changed since the last load; True when the registry changed.

        Without ``force`` the counter is read at most once per interval. A database error
        is logged once and leaves the registry as it is (the request goes on, and fails on
        its own if it needs the database); with ``force`` it is raised.
        """
        if not force and self._recent():
            return False
        async with self._lock:
            if not force and self._recent():
                return False  # another request checked while this one waited
            try:
                self._checked_at = self._clock()
                if await self._store.change_marker() == self._loaded:
                    changed = False
                else:
                    before = self._registry.revision
                    await self._load()
                    changed = self._registry.revision != before
            except Exception as exc:  # an outage must not fail requests that need no workflow
                # Still throttled: during an outage requests do not each wait on the database.
                if not self._failing:
                    _log.warning("Could not check for workflow changes: %s", exc)
                self._failing = True
                if force:
                    raise
                return False
            self._failing = False
            return changed

    def _recent(self) -> bool:
        checked = self._checked_at
        return checked is not None and self._clock() - checked < self._interval

    async def _load(self) -> list[ManifestProblem]:
        # The time before the read, the counter before the content: a commit after either
        # is seen by the next check.
        self._checked_at = self._clock()
        marker = await self._store.change_marker()
        authored, problems = await read_published(self._store, self._registry)
        self._registry.replace_authored(authored)
        self._loaded = marker
        sentences = left_out(problems)
        for sentence in sentences:
            if sentence not in self._warned:
                _log.warning("%s", sentence)
        self._warned = set(sentences)
        return problems
