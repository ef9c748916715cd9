"""One authored workflow as its revision log shows it, and writing its next revision.

The lifecycle rules (:mod:`aptix.workflows.authoring`) decide on a :class:`WorkflowState`
read from the store and write through :func:`commit`, which appends on top of the revision
the state was read at. The store's compare-and-set refuses the write when another request,
in this process or another, got there first: a decision made on revision 5 is never written
over revision 6, and the caller is told the revision the workflow is at (issue 25).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aptix.errors import RevisionConflict
from aptix.workflows.manifest import SemVer, WorkflowManifest, WorkflowStatus
from aptix.workflows.outcome import AuthoringOutcome
from aptix.workflows.registry import WorkflowRegistry
from aptix.workflows.store import (
    RevisionAction,
    StoredRevision,
    WorkflowStore,
    current_draft,
    last_published,
    served_revision,
)
from aptix.workflows.validation import validate_manifest

__all__ = ["WorkflowState", "commit", "read_listed", "read_state", "refused"]


@dataclass(frozen=True, slots=True)
class WorkflowState:
    """What one workflow's log says now: its revision, pending draft and served manifest."""

    workflow_id: str
    #: Its revisions, oldest first: every one; for a listing (:func:`read_listed`) only the
    #: newest and the newest deciding what is served, which is all that a list row reads.
    history: list[StoredRevision]
    #: Set for a built-in or file workflow: served to every org and read-only to authoring.
    deployment_wide: WorkflowManifest | None = None
    #: Why the published revision is not served (it no longer validates): empty when it is.
    not_served: str = ""

    @property
    def revision(self) -> int:
        """The newest stored revision; 0 for a workflow with none."""
        return self.history[-1].revision if self.history else 0

    @property
    def draft(self) -> StoredRevision | None:
        """The pending draft, if any."""
        return current_draft(self.history)

    @property
    def served(self) -> WorkflowManifest | None:
        """The manifest being served (from the log, not a process's cached registry)."""
        if self.deployment_wide is not None:
            return self.deployment_wide
        served = served_revision(self.history)
        return served.manifest if served is not None else None

    @property
    def working_copy(self) -> WorkflowManifest | None:
        """What authoring works on: the pending draft, else the served manifest."""
        draft = self.draft
        return draft.manifest if draft is not None else self.served

    @property
    def highest_published(self) -> SemVer | None:
        """The greatest version published so far (removed or not): the next must exceed it."""
        published = last_published(self.history)
        return published.manifest.semver if published is not None else None

    @property
    def tag(self) -> int | None:
        """The revision an ``ETag`` names: none for a read-only, deployment-wide workflow."""
        return None if self.deployment_wide is not None else self.revision

    def list_row(self) -> dict[str, Any] | None:
        """The shallow ``list_authoring_workflows`` row; None when nothing is left to show."""
        manifest, served = self.working_copy, self.served
        if manifest is None:
            return None
        row: dict[str, Any] = {
            "workflowId": manifest.workflow_id,
            "title": manifest.title,
            "status": manifest.status.value,
            "version": manifest.version,
            "visibility": manifest.visibility.value,
        }
        if served is not None and manifest.status is WorkflowStatus.DRAFT:
            row["publishedVersion"] = served.version
            # Served only while published or deprecated: a disabled one is not.
            row["publishedStatus"] = served.status.value
            # What the published version is listed as until the draft is published (the
            # console's Workflows list shows a disabled one from this row).
            row["publishedTitle"] = served.title
            row["publishedVisibility"] = served.visibility.value
        if self.not_served:
            row["served"] = False
            row["notServedReason"] = self.not_served
        if self.deployment_wide is not None:
            row["readOnly"] = True
        else:
            row["revision"] = self.revision
        return row

    def stale(self, expected_revision: int | None) -> AuthoringOutcome | None:
        """The refusal when the caller based its change on another revision, else None."""
        if expected_revision is None or expected_revision == self.revision:
            return None
        return refused(self.workflow_id, expected_revision, self.revision)


async def read_state(
    store: WorkflowStore, registry: WorkflowRegistry, workflow_id: str, org: str
) -> WorkflowState:
    """The state of ``org``'s ``workflow_id`` (the registry spells the id as it is served)."""
    wanted = workflow_id.strip()
    served = registry.get(wanted, org) if wanted else None
    if served is not None and registry.is_deployment_wide(served.workflow_id):
        return WorkflowState(served.workflow_id, [], served)
    canonical = served.workflow_id if served is not None else wanted
    history = await store.history(canonical, org)
    return WorkflowState(canonical, history, not_served=_not_served(history, registry))


async def read_listed(
    store: WorkflowStore, registry: WorkflowRegistry, org: str
) -> list[WorkflowState]:
    """The state of every workflow ``org`` sees, by id, as much as its list row needs.

    One read of the store for them all (review r4 F2, round 73: one history read each took
    11.6 s at 1,000 workflows and ran past the 30 s limit at 3,000). Each state is what
    :func:`read_state` gives but for ``history``, which holds only the revisions a row shows.
    """
    latest = await store.latest(org)
    own = {m.workflow_id: m for m in registry.authored(org)}
    states = []
    for wid in sorted({m.workflow_id for m in registry.all(org)} | latest.keys()):
        served = registry.get(wid, org)
        if served is not None and registry.is_deployment_wide(served.workflow_id):
            states.append(WorkflowState(served.workflow_id, [], served))
            continue
        canonical = served.workflow_id if served is not None else wid
        history = latest.get(canonical, [])
        reason = _not_served(history, registry, own.get(canonical))
        states.append(WorkflowState(canonical, history, not_served=reason))
    return states


def _not_served(
    history: list[StoredRevision],
    registry: WorkflowRegistry,
    serving: WorkflowManifest | None = None,
) -> str:
    """Why the published revision is left out of the registry (as the sync decides), or "".

    ``serving`` is what this process serves under that id: the same manifest validated when
    it was loaded, against the same tools, so it is not validated again.
    """
    published = served_revision(history)
    if published is None or (serving is not None and serving == published.manifest):
        return ""
    problems = validate_manifest(published.manifest, registry.known_tools)
    return "; ".join(f"{p.field}: {p.message.rstrip('.')}" for p in problems)


async def commit(
    store: WorkflowStore,
    state: WorkflowState,
    manifest: WorkflowManifest,
    action: RevisionAction,
    actor: str | None,
    org: str,
) -> StoredRevision | AuthoringOutcome:
    """Append ``manifest`` on top of ``state``'s revision, or the refusal when it moved on."""
    try:
        return await store.append(manifest, action, actor, org, expected_revision=state.revision)
    except RevisionConflict as exc:
        return refused(exc.workflow_id, exc.expected, exc.current)


def refused(workflow_id: str, based_on: int, current: int) -> AuthoringOutcome:
    """The refusal of a change based on ``based_on`` while the workflow is at ``current``."""
    if based_on == 0:
        message = (
            f"Workflow '{workflow_id}' was created meanwhile and is at revision {current}, "
            "but this change expected it not to exist yet: nothing was changed. Read it with "
            "get_workflow and change it with update_workflow."
        )
    else:
        message = (
            f"Workflow '{workflow_id}' is now at revision {current}, but this change was "
            f"based on revision {based_on}: nothing was changed. Read it again with "
            f"get_workflow, then repeat the change on revision {current} if it still applies."
        )
    outcome = AuthoringOutcome.fail("expectedRevision", message)
    return AuthoringOutcome(ok=False, errors=outcome.errors, current_revision=current)
