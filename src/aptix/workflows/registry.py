"""``WorkflowRegistry``: the served workflows, with the visibility and status rules of TUL-006.

Rules (DESIGN §6, TUL-006 §7.8, §8.5, §8.6):

* ``list_workflows`` and the boot message show public (and, in lists, experimental)
  workflows that are runnable: published or deprecated;
* hidden workflows are returned only when named by id, and match only on explicit initiation;
* disabled workflows are never runnable; they appear in match results with ``runnable: false``
  and the reason;
* deprecated and experimental workflows carry a note.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from aptix.workflows.manifest import WorkflowManifest, WorkflowStatus, WorkflowVisibility
from aptix.workflows.matching.combined import WorkflowMatcher
from aptix.workflows.matching.explicit import explicit_workflow_id, id_key
from aptix.workflows.validation import FieldProblem, validate_manifest

__all__ = ["WorkflowMatch", "WorkflowRegistry", "status_note"]

DEFAULT_MATCH_LIMIT = 5


@dataclass(frozen=True, slots=True)
class WorkflowMatch:
    """One ``match_workflow`` row."""

    workflow_id: str
    title: str
    match_score: float
    runnable: bool
    note: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """``{workflowId, title, matchScore, runnable, note?}``."""
        row: dict[str, Any] = {
            "workflowId": self.workflow_id,
            "title": self.title,
            "matchScore": self.match_score,
            "runnable": self.runnable,
        }
        if self.note:
            row["note"] = self.note
        return row


def status_note(manifest: WorkflowManifest) -> str | None:
    """The warning that goes with a workflow's status or visibility, if any."""
    wid = manifest.workflow_id
    if manifest.status is WorkflowStatus.DISABLED:
        return f"Workflow '{wid}' is disabled and cannot be run."
    if manifest.status is WorkflowStatus.DRAFT:
        return f"Workflow '{wid}' is a draft and cannot be run until it is published."
    if manifest.status is WorkflowStatus.DEPRECATED:
        return f"Workflow '{wid}' is deprecated; it still runs but may be removed."
    if manifest.visibility is WorkflowVisibility.EXPERIMENTAL:
        return f"Workflow '{wid}' is experimental; confirm with the user before starting it."
    return None


class WorkflowRegistry:
    """The authoritative set of served workflows (files, built-ins and published ones)."""

    def __init__(
        self,
        manifests: Iterable[WorkflowManifest] = (),
        *,
        known_tools: Collection[str] = (),
        matcher: WorkflowMatcher | None = None,
        sources: dict[str, str] | None = None,
    ) -> None:
        self._manifests = {m.workflow_id: m for m in manifests}
        self._sources = dict(sources or {})
        self._file_sources = dict(self._sources)
        self._known_tools = frozenset(known_tools)
        self._matcher = matcher or WorkflowMatcher()
        self._lock = threading.Lock()
        self._indexed_revision = -1
        #: Increases whenever the served set changes.
        self.revision = 0

    @property
    def known_tools(self) -> frozenset[str]:
        """The tool names permitted tools are checked against."""
        return self._known_tools

    @property
    def matcher(self) -> WorkflowMatcher:
        """The matcher used by :meth:`match`."""
        return self._matcher

    def get(self, workflow_id: str) -> WorkflowManifest | None:
        """The served manifest of ``workflow_id`` (any visibility or status), or None."""
        found = self._manifests.get(workflow_id)
        if found is None:
            key = id_key(workflow_id)
            found = next((m for w, m in self._manifests.items() if id_key(w) == key), None)
        return found

    def source_of(self, workflow_id: str) -> str | None:
        """Where a served workflow came from (``builtin:<file>``, a path, or ``store``)."""
        return self._sources.get(workflow_id)

    def file_source(self, workflow_id: str) -> str | None:
        """The file that defines ``workflow_id`` at start-up, even if authoring overrode it."""
        return self._file_sources.get(workflow_id)

    def all(self) -> list[WorkflowManifest]:
        """Every served manifest, sorted by id."""
        return [self._manifests[w] for w in sorted(self._manifests)]

    def listed(self) -> list[WorkflowManifest]:
        """What ``list_workflows`` shows: public and experimental, runnable, by id."""
        return [
            m for m in self.all() if m.runnable and m.visibility is not WorkflowVisibility.HIDDEN
        ]

    def problems(self, manifest: WorkflowManifest) -> list[FieldProblem]:
        """Why ``manifest`` may not be served (empty when it is complete)."""
        return validate_manifest(manifest, self._known_tools)

    def reset(
        self,
        manifests: Iterable[WorkflowManifest],
        *,
        sources: dict[str, str] | None = None,
        known_tools: Collection[str] | None = None,
    ) -> None:
        """Replace the whole served set (start-up), and the tools it is checked against."""
        with self._lock:
            self._manifests = {m.workflow_id: m for m in manifests}
            self._sources = dict(sources or {})
            self._file_sources = dict(self._sources)
            if known_tools is not None:
                self._known_tools = frozenset(known_tools)
            self.revision += 1

    def publish(self, manifest: WorkflowManifest, source: str = "store") -> None:
        """Serve ``manifest`` from now on, replacing any served version of its id."""
        with self._lock:
            self._manifests[manifest.workflow_id] = manifest
            self._sources[manifest.workflow_id] = source
            self.revision += 1

    def remove(self, workflow_id: str) -> bool:
        """Stop serving ``workflow_id``; False when it was not served."""
        with self._lock:
            if self._manifests.pop(workflow_id, None) is None:
                return False
            self._sources.pop(workflow_id, None)
            self.revision += 1
            return True

    def match(self, message: str, limit: int = DEFAULT_MATCH_LIMIT) -> list[WorkflowMatch]:
        """Workflows whose intent fits ``message``, best first (TUL-006 §3, §5)."""
        explicit = explicit_workflow_id(message, self._manifests)
        if explicit is not None:
            # An explicit request takes precedence over inference (TUL-006 §3.3).
            return [self._row(self._manifests[explicit], 1.0)]
        return [self._row(self._manifests[w], s) for w, s in self._ranked(message, limit)]

    def _ranked(self, message: str, limit: int) -> list[tuple[str, float]]:
        with self._lock:
            if self._indexed_revision != self.revision:
                self._matcher.rebuild(
                    m
                    for m in self.all()
                    if m.visibility is not WorkflowVisibility.HIDDEN
                    and m.status is not WorkflowStatus.DRAFT
                )
                self._indexed_revision = self.revision
            ranked = self._matcher.rank(message, limit)
        # Only the explicit id reaches 1.0, so that it always ranks first.
        return [(w, min(s, 0.99)) for w, s in ranked if w in self._manifests]

    def _row(self, manifest: WorkflowManifest, score: float) -> WorkflowMatch:
        return WorkflowMatch(
            workflow_id=manifest.workflow_id,
            title=manifest.title,
            match_score=score,
            runnable=manifest.runnable,
            note=status_note(manifest),
        )
