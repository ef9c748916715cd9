"""``WorkflowSync``: one workflow registry across every process on the same database.

Each process serves authored workflows from memory. Every authoring change appends a
revision and bumps the store's change counter in one transaction; :meth:`WorkflowSync.check`
compares that counter with the value this process last loaded and, when it moved, reads
what changed since its last read (:meth:`~aptix.workflows.store.WorkflowStore.served_since`):
the rows appended since, and the served revision of only the workflows a publish, status
change or removal touched. A draft anywhere costs every process that one read, and a publish
one more, however many workflows every org has; nothing is read per workflow (review r4 F1,
round 73: the whole history of every workflow of every org, one query each, held up the next
request of every org for 15 to 31 s with a few thousand drafts).

* Every request checks (the HTTP app, ``/mcp``, MCP over stdio, each model turn), and so
  does every decision taken inside one: each tool call before it is guarded or run (a
  workflow start included), and each step of a model turn. At most once per
  :data:`SYNC_INTERVAL` per process: one primary-key read, and a reload only after a change.
* Authoring checks too (throttled alike), but decides on the revision log it reads, never on
  this copy, and writes with a compare-and-set (:mod:`aptix.workflows.revisions`).
* Only a read that succeeded is a check. The first statement after a database restart or
  failover meets a dead pooled connection: the read is tried again at once on the renewed
  pool. A read that still fails leaves the copy to requests that decide nothing on it, and
  :meth:`WorkflowSync.confirm`, which every decision uses (a call in a session, a step of a
  turn), raises the database's error rather than decide on a copy it could not confirm.

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

from aptix.db.outage import is_disconnect
from aptix.invisible import on_one_line
from aptix.workflows.loader import ManifestProblem
from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.registry import WorkflowRegistry
from aptix.workflows.store import Key, ServedChanges, StoredRevision, WorkflowStore
from aptix.workflows.validation import FieldProblem, validate_manifest

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
    everything = await store.served_since(None)
    served = {key: entry for key, entry in everything.served.items() if entry is not None}
    return _checked(served, registry, {})[:2]


Verdicts = dict[Key, tuple[StoredRevision, list[FieldProblem]]]


def _checked(
    served: dict[Key, StoredRevision], registry: WorkflowRegistry, known: Verdicts
) -> tuple[Authored, list[ManifestProblem], Verdicts]:
    """The servable part of ``served`` and the problems of the rest, by org then id.

    A revision ``known`` already checked (against the same tools) is not validated again.
    """
    authored: Authored = {}
    problems: list[ManifestProblem] = []
    verdicts: Verdicts = {}
    for key in sorted(served):
        org, wid = key
        entry = served[key]
        if registry.is_deployment_wide(wid):
            continue
        before = known.get(key)
        if before is not None and before[0] == entry:
            found = before[1]
        else:
            found = validate_manifest(entry.manifest, registry.known_tools)
        verdicts[key] = (entry, found)
        source = f"{STORE_SOURCE} (org {org}) revision {entry.revision}"
        problems += [ManifestProblem(source, wid, p.field, p.message) for p in found]
        if not found:
            authored.setdefault(org, {})[wid] = entry.manifest
    return authored, problems, verdicts


def left_out(problems: list[ManifestProblem]) -> list[str]:
    """One sentence per stored revision ``problems`` keep from being served."""
    grouped: dict[tuple[str, str | None], list[str]] = {}
    for problem in problems:
        where = f"{problem.field}: " if problem.field else ""
        grouped.setdefault((problem.source, problem.workflow_id), []).append(
            where + problem.message.rstrip(".")
        )
    # One line each, as a ManifestProblem is: validate prints them, a warning logs them.
    return [
        on_one_line(
            f"Workflow '{wid}' from {source} no longer validates and is not served: "
            f"{'; '.join(found)} (run `aptix workflows validate`)."
        )
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
        #: When the last successful read began: the copy is what the store held then.
        self._checked_at: float | None = None
        #: When the last failed read began: check() waits an interval before the next one.
        self._failed_at: float | None = None
        self._loaded: int | None = None
        #: Where the last read ended: the next reads only what came after.
        self._cursor: object | None = None
        #: What the store serves, as read so far: (org, id) -> its served revision.
        self._served: dict[Key, StoredRevision] = {}
        #: Each served revision's problems, and the tools they were checked against.
        self._verdicts: Verdicts = {}
        self._tools: frozenset[str] | None = None
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
        its own if it needs the database); the next check repeats the read an interval
        after the failed one, and :meth:`confirm` at once. With ``force`` it is raised.
        """
        if not force and (self._recent() or self._failed_recently()):
            return False
        async with self._lock:
            if not force and (self._recent() or self._failed_recently()):
                return False  # another request checked while this one waited
            try:
                return await self._read()
            except Exception:  # an outage must not fail requests that need no workflow
                if force:
                    raise
                return False

    async def confirm(self) -> bool:
        """Like :meth:`check`, for a decision: on a copy read within one interval, or none.

        A call in a session (its permission, a ``start_workflow``) and each step of a turn
        decide on the workflows: a copy that could not be read again is no copy to decide
        on, so the database's error is raised (503 ``database_unavailable`` at the edge),
        however recently a check failed.
        """
        if self._recent():
            return False
        async with self._lock:
            if self._recent():
                return False
            return await self._read()

    async def _read(self) -> bool:
        """Read the counter, reload on a change; a failed read is no check (F1, round 67)."""
        started = self._clock()
        try:
            try:
                changed = await self._reload_if_changed()
            except Exception as exc:
                if not is_disconnect(exc):
                    raise
                # The first statement after a restart or failover meets a dead pooled
                # connection; the pool is renewed by now, so the second read is the answer.
                changed = await self._reload_if_changed()
        except Exception as exc:
            # Still throttled for check(): during an outage requests do not each wait on the
            # database. It never counts as a check: confirm() reads again.
            self._failed_at = started
            if not self._failing:
                _log.warning("Could not check for workflow changes: %s", exc)
            self._failing = True
            raise
        if self._checked_at is None or self._checked_at < started:  # a reload stamps later
            self._checked_at = started
        self._failed_at = None
        self._failing = False
        return changed

    async def _reload_if_changed(self) -> bool:
        if await self._store.change_marker() == self._loaded:
            return False
        before = self._registry.revision
        await self._load(self._cursor)
        return self._registry.revision != before

    def _recent(self) -> bool:
        checked = self._checked_at
        return checked is not None and self._clock() - checked < self._interval

    def _failed_recently(self) -> bool:
        failed = self._failed_at
        return failed is not None and self._clock() - failed < self._interval

    async def _load(self, cursor: object | None = None) -> list[ManifestProblem]:
        # The time before the read, the counter with (or before) the content: a commit after
        # either is seen by the next check. Stamped once the read succeeded: a failed one is
        # no check, and leaves the copy and the cursor as they were.
        started = self._clock()
        changes = await self._store.served_since(cursor)
        problems = self._apply(changes)
        self._loaded = changes.marker
        self._cursor = changes.cursor
        self._checked_at = started
        sentences = left_out(problems)
        for sentence in sentences:
            if sentence not in self._warned:
                _log.warning("%s", sentence)
        self._warned = set(sentences)
        return problems

    def _apply(self, changes: ServedChanges) -> list[ManifestProblem]:
        """Serve what ``changes`` read on top of what was read before."""
        served = {} if changes.complete else dict(self._served)
        for key, entry in changes.served.items():
            if entry is None:
                served.pop(key, None)
            else:
                served[key] = entry
        tools = self._registry.known_tools
        known = self._verdicts if tools == self._tools else {}
        authored, problems, verdicts = _checked(served, self._registry, known)
        self._registry.replace_authored(authored)
        self._served, self._verdicts, self._tools = served, verdicts, tools
        return problems
