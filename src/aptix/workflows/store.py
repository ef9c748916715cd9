"""``WorkflowStore``: where authoring keeps drafts and published versions, with full history.

A store is an append-only log of revisions per (org, workflow): authored workflows belong to
the org that drafted them, so two orgs may each author their own ``offsite``. What is a
draft, what is served and what was removed is derived from that log by the functions below,
so every backend (memory, SQL) only has to append and read back.

Every append is a compare-and-set: it names the revision it was based on (0 for a workflow
with no revision yet) and is refused with :class:`~aptix.errors.RevisionConflict` when the
workflow has moved on since, so two processes can never both build on one revision.

Every process serves what the store serves, and authoring lists an org's workflows: both read
many workflows at once, so a store answers them in a few statements whatever the number of
workflows (:meth:`WorkflowStore.served_since`, :meth:`WorkflowStore.latest`), never one each.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol

from aptix.errors import RevisionConflict
from aptix.workflows.manifest import WorkflowManifest

__all__ = [
    "InMemoryWorkflowStore",
    "RevisionAction",
    "ServedChanges",
    "StoredRevision",
    "WorkflowStore",
    "current_draft",
    "last_published",
    "served_revision",
]


class RevisionAction(StrEnum):
    """Why a revision was appended."""

    DRAFT = "draft"  # draft_workflow created the workflow
    UPDATE = "update"  # update_workflow changed the draft
    PUBLISH = "publish"  # publish_workflow served the draft
    STATUS = "status"  # the served version was deprecated, disabled or re-published
    REMOVE = "remove"  # the (disabled) workflow stopped being served
    DISCARD = "discard"  # the pending draft was dropped; the served version stays


_SERVING = (RevisionAction.PUBLISH, RevisionAction.STATUS)
#: The actions that decide what is served: the newest of them, unless it is a removal.
DECIDING = (*_SERVING, RevisionAction.REMOVE)


@dataclass(frozen=True, slots=True)
class StoredRevision:
    """One entry of a workflow's history: the manifest as it was after ``action``."""

    workflow_id: str
    revision: int
    action: RevisionAction
    manifest: WorkflowManifest
    created_at: datetime
    created_by: str | None = None
    org: str = "local"

    def to_wire(self) -> dict[str, object]:
        """One version-history row: who did what to which version, and when."""
        return {
            "revision": self.revision,
            "action": self.action.value,
            "version": self.manifest.version,
            "status": self.manifest.status.value,
            "at": self.created_at.isoformat(),
            "by": self.created_by,
        }


#: One authored workflow: (org, workflow id).
Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class ServedChanges:
    """What a store serves, as one read found it: every workflow, or those changed since."""

    #: The change counter the read saw (what :meth:`WorkflowStore.change_marker` answered).
    marker: int
    #: Given to the next :meth:`WorkflowStore.served_since`, it reads only what came after.
    cursor: object
    #: True: ``served`` is every served workflow. False: only those that may have changed.
    complete: bool
    #: The served revision of each workflow read; None for one that is no longer served.
    served: dict[Key, StoredRevision | None] = field(default_factory=dict)


class WorkflowStore(Protocol):
    """Persistence for authored workflows: an append-only revision log per workflow id."""

    async def append(
        self,
        manifest: WorkflowManifest,
        action: RevisionAction,
        actor: str | None,
        org: str,
        *,
        expected_revision: int | None = None,
    ) -> StoredRevision:
        """Append revision ``expected_revision + 1`` of ``org``'s ``manifest.workflow_id``.

        Raises :class:`~aptix.errors.RevisionConflict` when the workflow's newest revision is
        not ``expected_revision`` (0: none yet). ``None`` appends on top of whatever is newest:
        for loading fixtures and seeds only, never for a change a person asked for.
        """
        ...

    async def history(self, workflow_id: str, org: str) -> list[StoredRevision]:
        """Every revision of ``org``'s ``workflow_id``, oldest first (empty when unknown)."""
        ...

    async def workflow_ids(self, org: str) -> list[str]:
        """The ids ``org`` has at least one revision of, sorted."""
        ...

    async def orgs(self) -> list[str]:
        """The orgs that have authored anything, sorted."""
        ...

    async def change_marker(self) -> int:
        """A number that grows with every append: a cheap "did anything change?" check."""
        ...

    async def served_since(self, cursor: object | None) -> ServedChanges:
        """The served revisions of the workflows changed since ``cursor``, in a few reads.

        Every served workflow (``complete``) when ``cursor`` is None or the store cannot tell
        what changed since it; otherwise only those a change since may have served, retired
        or removed: a draft serves nothing, and costs nothing here.
        """
        ...

    async def latest(self, org: str) -> dict[str, list[StoredRevision]]:
        """Per workflow id of ``org``: what a list row needs of its log, in one read.

        Its newest revision and the newest that decides what is served (the same one, or
        none), oldest first: :func:`current_draft` and :func:`served_revision` read them
        as they read the whole history.
        """
        ...


def current_draft(history: Sequence[StoredRevision]) -> StoredRevision | None:
    """The pending draft: the newest revision, if it is a draft or an update of one."""
    if history and history[-1].action in (RevisionAction.DRAFT, RevisionAction.UPDATE):
        return history[-1]
    return None


def served_revision(history: Sequence[StoredRevision]) -> StoredRevision | None:
    """The revision being served: the newest publish/status change, unless removed since."""
    for entry in reversed(history):
        if entry.action is RevisionAction.REMOVE:
            return None
        if entry.action in _SERVING:
            return entry
    return None


def last_published(history: Sequence[StoredRevision]) -> StoredRevision | None:
    """The newest published revision, removed or not (versions must keep growing)."""
    return next((e for e in reversed(history) if e.action is RevisionAction.PUBLISH), None)


class InMemoryWorkflowStore:
    """A ``WorkflowStore`` in a dict: for tests and for running without a database."""

    def __init__(self) -> None:
        self._log: dict[tuple[str, str], list[StoredRevision]] = {}
        self._appended = 0
        #: Every append's workflow and action, in order: a cursor is a position in it.
        self._order: list[tuple[Key, RevisionAction]] = []
        self._lock = asyncio.Lock()

    async def append(
        self,
        manifest: WorkflowManifest,
        action: RevisionAction,
        actor: str | None,
        org: str,
        *,
        expected_revision: int | None = None,
    ) -> StoredRevision:
        """Append a revision, refusing it when the log moved past ``expected_revision``."""
        async with self._lock:
            current = len(self._log.get((org, manifest.workflow_id), ()))
            if expected_revision is not None and expected_revision != current:
                raise RevisionConflict(manifest.workflow_id, expected_revision, current)
            entries = self._log.setdefault((org, manifest.workflow_id), [])
            entry = StoredRevision(
                workflow_id=manifest.workflow_id,
                revision=len(entries) + 1,
                action=action,
                manifest=manifest,
                created_at=datetime.now(UTC),
                created_by=actor,
                org=org,
            )
            entries.append(entry)
            self._appended += 1
            self._order.append(((org, manifest.workflow_id), action))
            return entry

    async def history(self, workflow_id: str, org: str) -> list[StoredRevision]:
        """Every revision of ``org``'s ``workflow_id``, oldest first."""
        return list(self._log.get((org, workflow_id), ()))

    async def workflow_ids(self, org: str) -> list[str]:
        """The ids ``org`` has revisions of, sorted."""
        return sorted(w for o, w in self._log if o == org)

    async def orgs(self) -> list[str]:
        """The orgs with revisions, sorted."""
        return sorted({o for o, _ in self._log})

    async def change_marker(self) -> int:
        """How many revisions were appended."""
        return self._appended

    async def served_since(self, cursor: object | None) -> ServedChanges:
        """The served revisions of the workflows appended to since ``cursor`` (or of all)."""
        marker = await self.change_marker()
        done = len(self._order)
        if isinstance(cursor, int) and 0 <= cursor <= done:
            keys = {key for key, action in self._order[cursor:] if action in DECIDING}
            served = {key: served_revision(self._log[key]) for key in keys}
            return ServedChanges(marker, done, complete=False, served=served)
        everything = {key: served_revision(entries) for key, entries in self._log.items()}
        served = {key: entry for key, entry in everything.items() if entry is not None}
        return ServedChanges(marker, done, complete=True, served={**served})

    async def latest(self, org: str) -> dict[str, list[StoredRevision]]:
        """Each workflow's newest revision and the newest deciding what is served."""
        found: dict[str, list[StoredRevision]] = {}
        for (owner, wid), entries in self._log.items():
            if owner != org or not entries:
                continue
            deciding = next((e for e in reversed(entries) if e.action in DECIDING), None)
            newest = entries[-1]
            found[wid] = [newest] if deciding is None or deciding is newest else [deciding, newest]
        return found
