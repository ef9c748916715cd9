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
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aptix.workflows.manifest import (
    SemVer,
    WorkflowManifest,
    WorkflowStatus,
)
from aptix.workflows.outcome import (
    MANDATORY_FIELDS,
    AuthoringOutcome,
    is_empty,
    normalise_fields,
)
from aptix.workflows.registry import WorkflowRegistry
from aptix.workflows.store import (
    RevisionAction,
    StoredRevision,
    WorkflowStore,
    current_draft,
    last_published,
    served_revision,
)
from aptix.workflows.validation import FieldProblem, parse_manifest, validate_manifest

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
        self._lock = asyncio.Lock()
        #: Brings the registry up to date with the store (other processes author too).
        self._sync = sync

    async def _synced(self) -> None:
        """Called first inside the lock by every change: never decide on a stale registry."""
        if self._sync is not None:
            await self._sync()

    async def draft(
        self, workflow_id: str, title: str, description: str, actor: str | None, org: str
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
        if manifest is None or problems:
            return AuthoringOutcome.failures(problems)
        async with self._lock:
            await self._synced()
            if self._registry.is_deployment_wide(manifest.workflow_id):
                return self._read_only(manifest.workflow_id)
            history = await self._store.history(manifest.workflow_id, org)
            if self._registry.get(manifest.workflow_id, org) is not None or current_draft(history):
                return AuthoringOutcome.fail(
                    "workflowId",
                    f"Workflow '{manifest.workflow_id}' already exists; use get_workflow and "
                    "update_workflow to change it.",
                )
            published = last_published(history)
            if published is not None and manifest.semver <= published.manifest.semver:
                manifest = manifest.model_copy(
                    update={"version": _bump_minor(published.manifest.semver)}
                )
            await self._store.append(manifest, RevisionAction.DRAFT, actor, org)
        return AuthoringOutcome(
            ok=True,
            workflow=manifest.to_wire(),
            messages=(
                f"Draft '{manifest.workflow_id}' created. Add userIntentPatterns, "
                "requiredInputs, instructionText, permittedTools and completionCriteria with "
                "update_workflow, then call validate_workflow.",
            ),
        )

    async def get(self, workflow_id: str, org: str) -> AuthoringOutcome:
        """The pending draft, or else the served manifest (``get_workflow``)."""
        found = await self._working_copy(workflow_id, org)
        if found is None:
            return _unknown(workflow_id)
        manifest, served = found
        messages: list[str] = []
        if manifest.status is WorkflowStatus.DRAFT and served is not None:
            messages.append(
                f"This is a draft; version {served.version} stays served until the draft "
                "is published."
            )
        return AuthoringOutcome(ok=True, workflow=manifest.to_wire(), messages=tuple(messages))

    async def update(
        self, workflow_id: str, fields: Mapping[str, Any] | None, actor: str | None, org: str
    ) -> AuthoringOutcome:
        """Change fields of the draft, creating one from the served version if needed."""
        if not fields:
            return AuthoringOutcome.fail("fields", "fields must name at least one field to set.")
        changes, problems = normalise_fields(fields)
        if problems:
            return AuthoringOutcome.failures(problems)
        status = changes.get("status")
        if isinstance(status, str) and status.strip().lower() != "draft":
            if len(changes) > 1:
                return AuthoringOutcome.fail(
                    "status", "Change status in an update_workflow call of its own."
                )
            return await self._change_status(workflow_id, status.strip().lower(), actor, org)
        changes.pop("status", None)
        async with self._lock:
            await self._synced()
            found = await self._working_copy(workflow_id, org)
            if found is None:
                return _unknown(workflow_id)
            base, served = found
            if self._registry.is_deployment_wide(base.workflow_id):
                return self._read_only(base.workflow_id)
            new_draft = base.status is not WorkflowStatus.DRAFT
            merged = {**base.to_wire(), **changes, "status": "draft"}
            if new_draft and "version" not in changes:
                # A new draft is a new version: propose the next patch; the author raises
                # minor or major for additions or behaviour changes (TUL-006 §8.4).
                merged["version"] = _bump_patch(base.semver)
            manifest, problems = parse_manifest(merged)
            problems += [
                FieldProblem(name, f"{name} is mandatory and cannot be removed.")
                for name in sorted(MANDATORY_FIELDS & changes.keys())
                if is_empty(changes[name]) and not is_empty(base.to_wire()[name])
            ]
            if manifest is None or problems:
                return AuthoringOutcome.failures(problems)
            await self._store.append(manifest, RevisionAction.UPDATE, actor, org)
        messages = [f"Updated {', '.join(sorted(changes))} of draft '{manifest.workflow_id}'."]
        if new_draft and served is not None:
            messages.append(
                f"A new draft version {manifest.version} was created; version "
                f"{served.version} stays served until the draft is published. Raise the minor "
                "or major version for additions or behaviour changes."
            )
        return AuthoringOutcome(ok=True, workflow=manifest.to_wire(), messages=tuple(messages))

    async def validate(self, workflow_id: str, org: str) -> AuthoringOutcome:
        """Check the draft (or served version) the way publishing will (``validate_workflow``)."""
        found = await self._working_copy(workflow_id, org)
        if found is None:
            return _unknown(workflow_id)
        manifest, _ = found
        problems = await self._publish_problems(manifest, org)
        if problems:
            return AuthoringOutcome.failures(problems)
        return AuthoringOutcome(
            ok=True,
            workflow=manifest.to_wire(),
            messages=(f"Workflow '{manifest.workflow_id}' {manifest.version} is valid.",),
        )

    async def publish(self, workflow_id: str, actor: str | None, org: str) -> AuthoringOutcome:
        """Serve the draft: it must validate and carry a greater version (``publish_workflow``).

        The publish revision records who published which version, and when.
        """
        async with self._lock:
            await self._synced()
            found = await self._working_copy(workflow_id, org)
            if found is None:
                return _unknown(workflow_id)
            draft, _ = found
            if draft.status is not WorkflowStatus.DRAFT:
                return AuthoringOutcome.fail(
                    "status",
                    f"Workflow '{draft.workflow_id}' has no draft to publish; change it with "
                    "update_workflow first.",
                )
            problems = await self._publish_problems(draft, org)
            if problems:
                return AuthoringOutcome.failures(problems)
            published = draft.model_copy(update={"status": WorkflowStatus.PUBLISHED})
            await self._store.append(published, RevisionAction.PUBLISH, actor, org)
            self._registry.publish(published, org=org)
        return AuthoringOutcome(
            ok=True,
            workflow=published.to_wire(),
            messages=(
                f"Workflow '{published.workflow_id}' {published.version} is published and "
                "served from now on.",
            ),
        )

    async def list_workflows(self, org: str) -> AuthoringOutcome:
        """One shallow row per workflow ``org`` sees, its drafts included.

        Deployment-wide workflows are listed with ``readOnly: true``.
        """
        ids = sorted({m.workflow_id for m in self._registry.all(org)} | set(await self._ids(org)))
        rows: list[dict[str, Any]] = []
        for wid in ids:
            found = await self._working_copy(wid, org)
            if found is None:
                continue
            manifest, served = found
            row: dict[str, Any] = {
                "workflowId": manifest.workflow_id,
                "title": manifest.title,
                "status": manifest.status.value,
                "version": manifest.version,
                "visibility": manifest.visibility.value,
            }
            if served is not None and manifest.status is WorkflowStatus.DRAFT:
                row["publishedVersion"] = served.version
            if self._registry.is_deployment_wide(wid):
                row["readOnly"] = True
            rows.append(row)
        return AuthoringOutcome(ok=True, workflows=rows)

    async def history(self, workflow_id: str, org: str) -> list[StoredRevision]:
        """Every stored revision of ``org``'s ``workflow_id``, oldest first."""
        return await self._store.history(workflow_id.strip(), org)

    async def history_outcome(self, workflow_id: str, org: str) -> AuthoringOutcome:
        """The version history: who drafted, changed, published or retired what, and when."""
        entries = await self.history(workflow_id, org)
        if not entries:
            if self._registry.is_deployment_wide(workflow_id.strip()):
                return self._read_only(workflow_id.strip())
            return _unknown(workflow_id)
        return AuthoringOutcome(ok=True, history=[e.to_wire() for e in entries])

    async def discard(self, workflow_id: str, actor: str | None, org: str) -> AuthoringOutcome:
        """Drop the pending draft; the served version (if any) stays as it is."""
        async with self._lock:
            await self._synced()
            history = await self._store.history(workflow_id.strip(), org)
            draft = current_draft(history)
            if draft is None:
                return AuthoringOutcome.fail(
                    "workflowId", f"Workflow '{workflow_id.strip()}' has no pending draft."
                )
            await self._store.append(draft.manifest, RevisionAction.DISCARD, actor, org)
        served = served_revision(history)
        kept = f"version {served.manifest.version} stays served" if served else "nothing is served"
        return AuthoringOutcome(
            ok=True,
            messages=(
                f"Draft {draft.manifest.version} of '{draft.workflow_id}' was discarded; {kept}.",
            ),
        )

    async def remove(self, workflow_id: str, actor: str | None, org: str) -> AuthoringOutcome:
        """Stop serving a disabled, authored workflow; its history is kept (TUL-006 §8.9)."""
        async with self._lock:
            await self._synced()
            served = self._registry.get(workflow_id, org)
            if served is None:
                return _unknown(workflow_id)
            if self._registry.is_deployment_wide(served.workflow_id):
                return self._read_only(served.workflow_id)
            pending = await self._pending(served.workflow_id, org)
            if pending is not None:
                return pending
            if served.status is not WorkflowStatus.DISABLED:
                return AuthoringOutcome.fail(
                    "status",
                    f"Workflow '{served.workflow_id}' must be disabled before it is removed.",
                )
            await self._store.append(served, RevisionAction.REMOVE, actor, org)
            self._registry.remove(served.workflow_id, org=org)
        return AuthoringOutcome(
            ok=True,
            messages=(f"Workflow '{served.workflow_id}' was removed; its history is kept.",),
        )

    async def _change_status(
        self, workflow_id: str, status: str, actor: str | None, org: str
    ) -> AuthoringOutcome:
        try:
            target = WorkflowStatus("published" if status == "active" else status)
        except ValueError:
            return AuthoringOutcome.fail(
                "status", "status must be draft, published, deprecated or disabled."
            )
        async with self._lock:
            await self._synced()
            served = self._registry.get(workflow_id, org)
            if served is None:
                return AuthoringOutcome.fail(
                    "status",
                    f"Workflow '{workflow_id}' has no published version; use publish_workflow.",
                )
            if self._registry.is_deployment_wide(served.workflow_id):
                return self._read_only(served.workflow_id)
            pending = await self._pending(served.workflow_id, org)
            if pending is not None:
                return pending
            if target is WorkflowStatus.PUBLISHED and served.status is WorkflowStatus.PUBLISHED:
                return AuthoringOutcome.fail("status", "Use publish_workflow to publish a draft.")
            if target is WorkflowStatus.PUBLISHED and self.problems(served):
                return AuthoringOutcome.failures(self.problems(served))
            changed = served.model_copy(update={"status": target})
            await self._store.append(changed, RevisionAction.STATUS, actor, org)
            self._registry.publish(changed, org=org)
        return AuthoringOutcome(
            ok=True,
            workflow=changed.to_wire(),
            messages=(f"Workflow '{changed.workflow_id}' is now {target.value}.",),
        )

    def problems(self, manifest: WorkflowManifest) -> list[FieldProblem]:
        """Content problems of ``manifest`` against the registered tools."""
        return validate_manifest(manifest, self._registry.known_tools)

    async def _pending(self, workflow_id: str, org: str) -> AuthoringOutcome | None:
        """A refusal naming the pending draft, which a status change or removal would bury."""
        draft = current_draft(await self._store.history(workflow_id, org))
        if draft is None:
            return None
        return AuthoringOutcome.fail(
            "status",
            f"Workflow '{workflow_id}' has a pending draft (version {draft.manifest.version}); "
            "publish it with publish_workflow or drop it with discard_draft first, so that "
            "it is not lost.",
        )

    def _read_only(self, workflow_id: str) -> AuthoringOutcome:
        source = self._registry.file_source(workflow_id) or "the deployment's files"
        return AuthoringOutcome.fail(
            "workflowId",
            f"Workflow '{workflow_id}' is defined in {source} for the whole deployment and is "
            "read-only to authoring; it changes through its file and a review (TUL-006 §8.2).",
        )

    async def _publish_problems(self, manifest: WorkflowManifest, org: str) -> list[FieldProblem]:
        problems = self.problems(manifest)
        if manifest.status is WorkflowStatus.DRAFT:
            floor = await self._highest_published(manifest.workflow_id, org)
            if floor is not None and manifest.semver <= floor:
                problems.append(
                    FieldProblem(
                        "version",
                        f"version {manifest.version} must be greater than the published "
                        f"version {floor}.",
                    )
                )
        return problems

    async def _highest_published(self, workflow_id: str, org: str) -> SemVer | None:
        versions: list[SemVer] = []
        published = last_published(await self._store.history(workflow_id, org))
        if published is not None:
            versions.append(published.manifest.semver)
        served = self._registry.get(workflow_id, org)
        if served is not None:
            versions.append(served.semver)
        return max(versions) if versions else None

    async def _working_copy(
        self, workflow_id: str, org: str
    ) -> tuple[WorkflowManifest, WorkflowManifest | None] | None:
        """The manifest authoring works on (the draft, else the served one) and the served one."""
        wanted = workflow_id.strip()
        served = self._registry.get(wanted, org) if wanted else None
        if served is not None and self._registry.is_deployment_wide(served.workflow_id):
            return served, served
        history = await self._store.history(served.workflow_id if served else wanted, org)
        draft = current_draft(history)
        if draft is not None:
            return draft.manifest, served
        if served is not None:
            return served, served
        return None

    async def _ids(self, org: str) -> list[str]:
        ids = []
        for wid in await self._store.workflow_ids(org):
            history = await self._store.history(wid, org)
            if current_draft(history) or served_revision(history):
                ids.append(wid)
        return ids


def _bump_patch(version: SemVer) -> str:
    return f"{version.major}.{version.minor}.{version.patch + 1}"


def _bump_minor(version: SemVer) -> str:
    return f"{version.major}.{version.minor + 1}.0"


def _unknown(workflow_id: str) -> AuthoringOutcome:
    return AuthoringOutcome.fail("workflowId", f"Unknown workflow '{workflow_id.strip()}'.")
