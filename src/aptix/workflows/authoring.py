"""``WorkflowAuthoring``: the rules behind ``agent_workflow_authoring`` (TUL-006 §8, §10).

* A draft is invisible to the registry; ``publish_workflow`` serves it at once, and only when
  it validates and its version is greater than every version published before.
* Editing a served workflow creates a new draft; the served version stays until the draft is
  published.
* ``status`` ``deprecated``/``disabled`` changes the served version immediately (governance,
  not content), but never while a draft is pending: the draft is published or discarded
  first; removal requires ``disabled`` first (§8.9) and keeps the history.
* Authored workflows belong to the org that drafted them (every method takes ``org``);
  built-in and file workflows are deployment-wide and read-only here (TUL-006 §8.2).
* Every change decides on the workflow's log as stored now and writes on top of the revision
  it read (:mod:`aptix.workflows.revisions`): across processes the loser of a race is
  refused, naming the current revision, and a caller's ``expected_revision`` must match.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from aptix.workflows.governance import (
    change_status,
    parse_status,
    read_only,
    remove,
    unchangeable,
)
from aptix.workflows.manifest import SemVer, WorkflowManifest, WorkflowStatus
from aptix.workflows.outcome import (
    MANDATORY_FIELDS,
    AuthoringOutcome,
    is_empty,
    normalise_fields,
)
from aptix.workflows.registry import WorkflowRegistry
from aptix.workflows.revisions import WorkflowState, commit, read_listed, read_state
from aptix.workflows.store import RevisionAction, StoredRevision, WorkflowStore
from aptix.workflows.validation import (
    FieldProblem,
    limit_problems,
    parse_manifest,
    single_line_problems,
    validate_manifest,
)

__all__ = ["WorkflowAuthoring"]

FIRST_VERSION = "0.1.0"


class WorkflowAuthoring:
    """Draft, edit, validate, publish, list and retire workflows against a store."""

    def __init__(
        self,
        store: WorkflowStore,
        registry: WorkflowRegistry,
        *,
        sync: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        self._store = store
        self._registry = registry
        # Queues this process's changes (parallel calls of one model response then build on
        # each other); across processes the store's compare-and-set is the guard.
        self._lock = asyncio.Lock()
        #: Brings the registry up to date with the store (other processes author too).
        self._sync = sync

    @asynccontextmanager
    async def _changing(self, workflow_id: str, org: str) -> AsyncIterator[WorkflowState]:
        """Every change runs inside: the lock held, the registry checked, then the log read."""
        async with self._lock:
            if self._sync is not None:
                await self._sync()
            yield await read_state(self._store, self._registry, workflow_id, org)

    async def draft(
        self,
        workflow_id: str,
        title: str,
        description: str,
        actor: str | None,
        org: str,
        *,
        expected_revision: int | None = None,
    ) -> AuthoringOutcome:
        """Create a draft with the minimal fields (TUL-006 §10.2 ``draft_workflow``)."""
        manifest, problems = parse_manifest(
            {
                "workflowId": workflow_id,
                "title": title,
                "description": description,
                "version": FIRST_VERSION,
                "status": "draft",
            }
        )
        problems += [
            FieldProblem(name, f"{name} is missing.")
            for name, value in (("title", title), ("description", description))
            if not value.strip()
        ]
        if manifest is not None:
            # Refused now rather than at publish: every revision stores the whole manifest.
            problems += limit_problems(manifest) + single_line_problems(manifest, {"title"})
        if manifest is None or problems:
            return AuthoringOutcome.failures(problems)
        async with self._changing(manifest.workflow_id, org) as state:
            refusal = unchangeable(self._registry, state, expected_revision)
            if refusal is not None:
                return refusal
            if state.working_copy is not None:
                return AuthoringOutcome.fail(
                    "workflowId",
                    f"Workflow '{state.workflow_id}' already exists; use get_workflow and "
                    "update_workflow to change it.",
                )
            floor = state.highest_published
            if floor is not None and manifest.semver <= floor:
                manifest = manifest.model_copy(update={"version": _bump_minor(floor)})
            stored = await commit(self._store, state, manifest, RevisionAction.DRAFT, actor, org)
        if isinstance(stored, AuthoringOutcome):
            return stored
        return AuthoringOutcome(
            ok=True,
            workflow=manifest.to_wire(),
            revision=stored.revision,
            messages=(
                f"Draft '{manifest.workflow_id}' created. Add userIntentPatterns, "
                "requiredInputs, instructionText, permittedTools and completionCriteria with "
                "update_workflow, then call validate_workflow.",
            ),
        )

    async def get(self, workflow_id: str, org: str) -> AuthoringOutcome:
        """The pending draft, or else the served manifest (``get_workflow``)."""
        state = await read_state(self._store, self._registry, workflow_id, org)
        manifest, served = state.working_copy, state.served
        if manifest is None:
            return _unknown(workflow_id)
        messages: list[str] = []
        if manifest.status is WorkflowStatus.DRAFT and served is not None:
            messages.append(f"This is a draft; {_meanwhile(state)} until the draft is published.")
        if state.not_served and served is not None:
            messages.append(
                f"Version {served.version} is published but not served: it no longer "
                f"validates ({state.not_served}). Fix it with update_workflow and publish."
            )
        return AuthoringOutcome(
            ok=True,
            workflow=manifest.to_wire(),
            messages=tuple(messages),
            revision=state.tag,
        )

    async def update(
        self,
        workflow_id: str,
        fields: Mapping[str, Any] | None,
        actor: str | None,
        org: str,
        *,
        expected_revision: int | None = None,
    ) -> AuthoringOutcome:
        """Change fields of the draft, creating one from the served version if needed."""
        if not fields:
            return AuthoringOutcome.fail("fields", "fields must name at least one field to set.")
        if all(value is None for value in fields.values()):
            return AuthoringOutcome.fail(
                "fields", "fields must name at least one field to set: every value given is null."
            )
        changes, problems = normalise_fields(fields)
        if problems:
            return AuthoringOutcome.failures(problems)
        status = changes.get("status", "draft")
        if not isinstance(status, str):
            return AuthoringOutcome.fail(
                "status", "status must be draft, published, deprecated or disabled."
            )
        if status.strip().lower() != "draft":
            others = {name: value for name, value in changes.items() if name != "status"}
            return await self._change_status(
                workflow_id, status.strip().lower(), others, actor, org, expected_revision
            )
        # ``status: draft`` asks for a draft of the served version even when no field changes.
        draft_asked = changes.pop("status", None) is not None
        async with self._changing(workflow_id, org) as state:
            # The caller's revision first: a workflow gone since is a stale change too.
            refusal = unchangeable(self._registry, state, expected_revision)
            if refusal is not None:
                return refusal
            base, served = state.working_copy, state.served
            if base is None:
                return _unknown(workflow_id)
            new_draft = base.status is not WorkflowStatus.DRAFT
            if not changes and not new_draft:
                return AuthoringOutcome.fail(
                    "status",
                    f"Workflow '{base.workflow_id}' is a draft already; name a field to change.",
                )
            merged = {**base.to_wire(), **changes, "status": "draft"}
            if new_draft and "version" not in changes:
                # A new draft is a new version: propose the next patch; the author raises
                # minor or major for additions or behaviour changes (TUL-006 §8.4).
                merged["version"] = _bump_patch(base.semver)
            manifest, problems = parse_manifest(merged)
            # Compared as stored (trimmed, listified): a client re-sending what it read
            # changes nothing, and must neither write a revision nor leave a pending draft.
            stored_now = base.to_wire()
            wanted = manifest.to_wire() if manifest is not None else {}
            changed = sorted(name for name in changes if wanted.get(name) != stored_now[name])
            if changes and not changed and not (new_draft and draft_asked):
                return _unchanged(state, base, sorted(changes), new_draft=new_draft)
            problems += [
                FieldProblem(name, f"{name} is mandatory and cannot be removed.")
                for name in sorted(MANDATORY_FIELDS & changes.keys())
                if is_empty(changes[name]) and not is_empty(stored_now[name])
            ]
            if manifest is not None:
                problems += limit_problems(manifest) + single_line_problems(manifest, changes)
            if manifest is None or problems:
                return AuthoringOutcome.failures(problems)
            stored = await commit(self._store, state, manifest, RevisionAction.UPDATE, actor, org)
        if isinstance(stored, AuthoringOutcome):
            return stored
        # ``status: draft`` alone changes no field: it starts a draft of the served version.
        what = ", ".join(changed)
        messages = [f"Updated {what} of draft '{manifest.workflow_id}'."] if what else []
        if new_draft and served is not None:
            messages.append(
                f"A new draft version {manifest.version} was created; {_meanwhile(state)} "
                "until the draft is published. Raise the minor or major version for additions "
                "or behaviour changes."
            )
        return AuthoringOutcome(
            ok=True, workflow=manifest.to_wire(), messages=tuple(messages), revision=stored.revision
        )

    async def validate(self, workflow_id: str, org: str) -> AuthoringOutcome:
        """Check the draft (or served version) the way publishing will (``validate_workflow``)."""
        state = await read_state(self._store, self._registry, workflow_id, org)
        manifest = state.working_copy
        if manifest is None:
            return _unknown(workflow_id)
        problems = self._publish_problems(manifest, state)
        if problems:
            # The revision checked, as on success: a caller showing another one (someone
            # changed the workflow since) knows these problems are not of what it shows.
            return dataclasses.replace(AuthoringOutcome.failures(problems), revision=state.tag)
        return AuthoringOutcome(
            ok=True,
            workflow=manifest.to_wire(),
            messages=(f"Workflow '{manifest.workflow_id}' {manifest.version} is valid.",),
            revision=state.tag,
        )

    async def publish(
        self,
        workflow_id: str,
        actor: str | None,
        org: str,
        *,
        expected_revision: int | None = None,
    ) -> AuthoringOutcome:
        """Serve the draft: it must validate and carry a greater version (``publish_workflow``).

        The publish revision records who published which version, and when.
        """
        async with self._changing(workflow_id, org) as state:
            refusal = state.stale(expected_revision)
            if refusal is not None:
                return refusal
            draft = state.working_copy
            if draft is None:
                return _unknown(workflow_id)
            if draft.status is not WorkflowStatus.DRAFT:
                return AuthoringOutcome.fail(
                    "status",
                    f"Workflow '{draft.workflow_id}' has no draft to publish; change it with "
                    "update_workflow first.",
                )
            problems = self._publish_problems(draft, state)
            if problems:
                return AuthoringOutcome.failures(problems)
            published = draft.model_copy(update={"status": WorkflowStatus.PUBLISHED})
            stored = await commit(self._store, state, published, RevisionAction.PUBLISH, actor, org)
            if isinstance(stored, AuthoringOutcome):
                return stored
            self._registry.publish(published, org=org)
        return AuthoringOutcome(
            ok=True,
            workflow=published.to_wire(),
            revision=stored.revision,
            messages=(
                f"Workflow '{published.workflow_id}' {published.version} is published and "
                "served from now on.",
            ),
        )

    async def list_workflows(self, org: str) -> AuthoringOutcome:
        """One shallow row per workflow ``org`` sees, its drafts included.

        Deployment-wide workflows are listed with ``readOnly: true``; authored ones carry
        their ``revision``. The store is read once for them all.
        """
        states = await read_listed(self._store, self._registry, org)
        rows = [row for state in states if (row := state.list_row()) is not None]
        return AuthoringOutcome(ok=True, workflows=rows)

    async def revision(self, workflow_id: str, org: str) -> int | None:
        """The revision an ``ETag`` names for ``org``'s ``workflow_id``; None before its first."""
        state = await read_state(self._store, self._registry, workflow_id, org)
        return state.tag or None  # none for a deployment-wide workflow, nor at revision 0

    async def history(self, workflow_id: str, org: str) -> list[StoredRevision]:
        """Every stored revision of ``org``'s ``workflow_id``, oldest first."""
        return await self._store.history(workflow_id.strip(), org)

    async def history_outcome(self, workflow_id: str, org: str) -> AuthoringOutcome:
        """The version history: who drafted, changed, published or retired what, and when."""
        entries = await self.history(workflow_id, org)
        if not entries:
            if self._registry.is_deployment_wide(workflow_id.strip()):
                return read_only(self._registry, workflow_id.strip())
            return _unknown(workflow_id)
        return AuthoringOutcome(
            ok=True, history=[e.to_wire() for e in entries], revision=entries[-1].revision
        )

    async def discard(
        self,
        workflow_id: str,
        actor: str | None,
        org: str,
        *,
        expected_revision: int | None = None,
    ) -> AuthoringOutcome:
        """Drop the pending draft; the served version (if any) stays as it is."""
        async with self._changing(workflow_id, org) as state:
            refusal = state.stale(expected_revision)
            if refusal is not None:
                return refusal
            # Nothing of the caller's org (another org's, never drafted, removed): the answer
            # get_workflow gives, not one that speaks as if the workflow existed.
            if state.working_copy is None:
                return _unknown(workflow_id)
            draft = state.draft
            if draft is None:
                return AuthoringOutcome.fail(
                    "workflowId", f"Workflow '{workflow_id.strip()}' has no pending draft."
                )
            stored = await commit(
                self._store, state, draft.manifest, RevisionAction.DISCARD, actor, org
            )
        if isinstance(stored, AuthoringOutcome):
            return stored
        return AuthoringOutcome(
            ok=True,
            revision=stored.revision,
            messages=(
                f"Draft {draft.manifest.version} of '{draft.workflow_id}' was discarded; "
                f"{_meanwhile(state)}.",
            ),
        )

    async def remove(
        self,
        workflow_id: str,
        actor: str | None,
        org: str,
        *,
        expected_revision: int | None = None,
    ) -> AuthoringOutcome:
        """Stop serving a disabled, authored workflow; its history is kept (TUL-006 §8.9)."""
        async with self._changing(workflow_id, org) as state:
            refusal = unchangeable(self._registry, state, expected_revision)
            if refusal is not None:
                return refusal
            return await remove(self._store, self._registry, state, actor, org, expected_revision)

    async def _change_status(
        self,
        workflow_id: str,
        status: str,
        others: dict[str, Any],
        actor: str | None,
        org: str,
        expected_revision: int | None,
    ) -> AuthoringOutcome:
        target = parse_status(status)
        if isinstance(target, AuthoringOutcome):
            return target
        async with self._changing(workflow_id, org) as state:
            refusal = unchangeable(self._registry, state, expected_revision)
            if refusal is not None:
                return refusal
            base = state.working_copy
            # Fields re-sent as read ride along with a status change; a real content change
            # goes through a draft, so it is refused with a status change.
            if base is not None and _differing(base, others):
                return AuthoringOutcome.fail(
                    "status", "Change status in an update_workflow call of its own."
                )
            served = state.served
            # The status the workflow already has writes nothing (once governance could act:
            # a pending draft is still named, so that it is not mistaken for the served one).
            if base is not None and state.draft is None and served and target is served.status:
                return _unchanged(state, base, sorted([*others, "status"]), new_draft=False)
            return await change_status(
                self._store, self._registry, state, target, actor, org, expected_revision
            )

    def problems(self, manifest: WorkflowManifest) -> list[FieldProblem]:
        """Content problems of ``manifest`` against the registered tools."""
        return validate_manifest(manifest, self._registry.known_tools)

    def _publish_problems(
        self, manifest: WorkflowManifest, state: WorkflowState
    ) -> list[FieldProblem]:
        problems = self.problems(manifest)
        floor = state.highest_published
        if (
            manifest.status is WorkflowStatus.DRAFT
            and floor is not None
            and manifest.semver <= floor
        ):
            problems.append(
                FieldProblem(
                    "version",
                    f"version {manifest.version} must be greater than the published "
                    f"version {floor}.",
                )
            )
        return problems


def _unchanged(
    state: WorkflowState, base: WorkflowManifest, given: list[str], *, new_draft: bool
) -> AuthoringOutcome:
    """The answer to an update whose every field already holds the value given."""
    names = ", ".join(given)
    held = "holds the value" if len(given) == 1 else "hold the values"
    messages = [
        f"Nothing changed: {names} of '{base.workflow_id}' already {held} given, "
        f"so no revision was written (the workflow stays at revision {state.revision})."
    ]
    if new_draft:
        messages.append(f"No draft was created; {_meanwhile(state)}.")
    return AuthoringOutcome(
        ok=True, workflow=base.to_wire(), messages=tuple(messages), revision=state.tag
    )


def _differing(base: WorkflowManifest, fields: Mapping[str, Any]) -> list[str]:
    """The names in ``fields`` whose values, compared as stored, differ from ``base``'s."""
    if not fields:
        return []
    stored_now = base.to_wire()
    manifest, _ = parse_manifest({**stored_now, **fields})
    if manifest is None:
        return sorted(fields)
    wanted = manifest.to_wire()
    return sorted(name for name in fields if wanted.get(name) != stored_now[name])


def _meanwhile(state: WorkflowState) -> str:
    """What the published version does while a draft is pending: served, unless it is not."""
    served = state.served
    if served is None:
        return "nothing is served"
    if served.status is WorkflowStatus.DISABLED:
        return f"version {served.version} stays disabled (not served)"
    if state.not_served:
        return f"version {served.version} stays published but not served"
    return f"version {served.version} stays served"


def _bump_patch(version: SemVer) -> str:
    return f"{version.major}.{version.minor}.{version.patch + 1}"


def _bump_minor(version: SemVer) -> str:
    return f"{version.major}.{version.minor + 1}.0"


def _unknown(workflow_id: str) -> AuthoringOutcome:
    return AuthoringOutcome.fail("workflowId", f"Unknown workflow '{workflow_id.strip()}'.")
