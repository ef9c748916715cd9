"""``WorkflowRegistry``: the served workflows, with the visibility and status rules of TUL-006.

Rules (DESIGN §6, TUL-006 §7.8, §8.5, §8.6):

* ``list_workflows`` and the boot message show public (and, in lists, experimental)
  workflows that are runnable: published or deprecated;
* hidden workflows are returned only when named by id, and match only on explicit initiation;
* disabled workflows are never runnable; they appear in match results with ``runnable: false``
  and the reason;
* deprecated and experimental workflows carry a note.

Tenancy (DESIGN §6): built-in and file workflows are deployment-wide and every org sees them;
authored workflows belong to the org that drafted them, and only that org sees, matches and
boots with them. Every read takes the caller's ``org``; ``None`` means the deployment-wide
set alone.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from aptix.workflows.manifest import WorkflowManifest, WorkflowStatus, WorkflowVisibility
from aptix.workflows.matching.arbiter import MatchArbiter
from aptix.workflows.matching.combined import WorkflowMatcher
from aptix.workflows.matching.explicit import id_key, keyed, named_in
from aptix.workflows.validation import FieldProblem, validate_manifest

__all__ = ["WorkflowMatch", "WorkflowRegistry", "status_note"]

DEFAULT_MATCH_LIMIT = 5

#: Runs blocking work off the event loop: ``await run(fn, *args)``.
Runner = Callable[..., Awaitable[Any]]


async def _in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.to_thread(fn, *args)


@dataclass(frozen=True, slots=True)
class WorkflowMatch:
    """One ``match_workflow`` row."""

    workflow_id: str
    title: str
    match_score: float
    runnable: bool
    note: str | None = None
    #: What the match rests on: the closest pattern or the shared terms.
    why: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """``{workflowId, title, matchScore, runnable, note?, why?}``."""
        row: dict[str, Any] = {
            "workflowId": self.workflow_id,
            "title": self.title,
            "matchScore": self.match_score,
            "runnable": self.runnable,
        }
        if self.note:
            row["note"] = self.note
        if self.why:
            row["why"] = self.why
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
    """The authoritative set of served workflows: deployment-wide ones and each org's own."""

    def __init__(
        self,
        manifests: Iterable[WorkflowManifest] = (),
        *,
        known_tools: Collection[str] = (),
        matcher: WorkflowMatcher | None = None,
        sources: dict[str, str] | None = None,
        matcher_factory: Callable[[], WorkflowMatcher] | None = None,
    ) -> None:
        self._manifests = {m.workflow_id: m for m in manifests}
        self._authored: dict[str, dict[str, WorkflowManifest]] = {}
        self._sources = dict(sources or {})
        self._file_sources = dict(self._sources)
        self._known_tools = frozenset(known_tools)
        self._matcher = matcher or WorkflowMatcher()
        self._matcher_factory = matcher_factory or WorkflowMatcher
        #: org (None: deployment-wide only) -> (revision indexed, matcher)
        self._indexes: dict[str | None, tuple[int, WorkflowMatcher]] = {}
        #: org (None: deployment-wide only) -> (revision keyed, id_key -> id of the served set)
        self._keys: dict[str | None, tuple[int, dict[str, str]]] = {}
        self._lock = threading.Lock()
        #: Increases whenever the served set changes.
        self.revision = 0
        #: The model as arbiter (``APTIX_MATCH_ARBITER``), used by :meth:`match_async`.
        self.arbiter: MatchArbiter | None = None

    @property
    def known_tools(self) -> frozenset[str]:
        """The tool names permitted tools are checked against."""
        return self._known_tools

    @property
    def matcher(self) -> WorkflowMatcher:
        """The matcher of the deployment-wide set (orgs with authored workflows get their own)."""
        return self._matcher

    def _served(self, org: str | None) -> dict[str, WorkflowManifest]:
        authored = self._authored.get(org, {}) if org is not None else {}
        if not authored:
            return self._manifests
        # Deployment-wide workflows win: authoring cannot shadow a reviewed file.
        return {**authored, **self._manifests}

    def get(self, workflow_id: str, org: str | None = None) -> WorkflowManifest | None:
        """The manifest ``org`` is served under ``workflow_id`` (any visibility or status)."""
        served = self._served(org)
        found = served.get(workflow_id)
        if found is None:
            wid = self._keyed(org).get(id_key(workflow_id))
            found = None if wid is None else served.get(wid)
        return found

    def _keyed(self, org: str | None) -> dict[str, str]:
        """``org``'s served ids by :func:`id_key`, built once per revision, not per call."""
        key = org if org is not None and self._authored.get(org) else None
        with self._lock:
            cached = self._keys.get(key)
            if cached is None or cached[0] != self.revision:
                cached = (self.revision, keyed(self._served(org)))
                self._keys[key] = cached
            return cached[1]

    def _explicit(
        self, message: str, served: dict[str, WorkflowManifest], org: str | None
    ) -> str | None:
        """The served workflow ``message`` names explicitly (TUL-006 §3.3), if any."""
        if "workflow" not in message.casefold():
            return None
        named = named_in(message, self._keyed(org))
        # The set may have changed since ``served`` was read: only what it holds is named.
        return named if named in served else None

    def is_deployment_wide(self, workflow_id: str) -> bool:
        """True for a built-in or file workflow: read-only to authoring."""
        return self.get(workflow_id) is not None

    def source_of(self, workflow_id: str, org: str | None = None) -> str | None:
        """Where a served workflow came from (``builtin:<file>``, a path, or ``store``)."""
        if workflow_id in self._manifests:
            return self._sources.get(workflow_id)
        if org is not None and workflow_id in self._authored.get(org, {}):
            return "store"
        return None

    def file_source(self, workflow_id: str) -> str | None:
        """The file that defines ``workflow_id`` at start-up (deployment-wide workflows)."""
        return self._file_sources.get(workflow_id)

    def all(self, org: str | None = None) -> list[WorkflowManifest]:
        """Every manifest served to ``org``, sorted by id."""
        served = self._served(org)
        return [served[w] for w in sorted(served)]

    def authored(self, org: str) -> list[WorkflowManifest]:
        """The workflows ``org`` authored and published, sorted by id."""
        own = self._authored.get(org, {})
        return [own[w] for w in sorted(own)]

    def listed(self, org: str | None = None) -> list[WorkflowManifest]:
        """What ``list_workflows`` shows ``org``: public and experimental, runnable, by id."""
        return [
            m for m in self.all(org) if m.runnable and m.visibility is not WorkflowVisibility.HIDDEN
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
        """Replace the deployment-wide set (start-up), and the tools it is checked against."""
        with self._lock:
            self._manifests = {m.workflow_id: m for m in manifests}
            self._sources = dict(sources or {})
            self._file_sources = dict(self._sources)
            if known_tools is not None:
                self._known_tools = frozenset(known_tools)
            self.revision += 1

    def publish(
        self, manifest: WorkflowManifest, source: str = "store", *, org: str | None = None
    ) -> None:
        """Serve ``manifest`` to ``org`` (deployment-wide with None), replacing its version."""
        with self._lock:
            if org is None:
                self._manifests[manifest.workflow_id] = manifest
                self._sources[manifest.workflow_id] = source
            else:
                self._authored.setdefault(org, {})[manifest.workflow_id] = manifest
            self.revision += 1

    def remove(self, workflow_id: str, *, org: str | None = None) -> bool:
        """Stop serving ``workflow_id`` (``org``'s, or deployment-wide with None)."""
        with self._lock:
            own = self._manifests if org is None else self._authored.get(org, {})
            if own.pop(workflow_id, None) is None:
                return False
            if org is None:
                self._sources.pop(workflow_id, None)
            elif not own:
                self._authored.pop(org, None)
                self._indexes.pop(org, None)
                self._keys.pop(org, None)
            self.revision += 1
            return True

    def replace_authored(self, authored: dict[str, dict[str, WorkflowManifest]]) -> bool:
        """Serve exactly ``authored`` (org -> id -> manifest); True when anything changed."""
        with self._lock:
            if authored == self._authored:
                return False
            self._authored = {org: dict(own) for org, own in authored.items() if own}
            self._indexes = {k: v for k, v in self._indexes.items() if k is None}
            self._keys = {k: v for k, v in self._keys.items() if k is None}
            self.revision += 1
            return True

    def match(
        self, message: str, limit: int = DEFAULT_MATCH_LIMIT, org: str | None = None
    ) -> list[WorkflowMatch]:
        """Workflows served to ``org`` whose intent fits ``message``, best first."""
        served = self._served(org)
        explicit = self._explicit(message, served, org)
        if explicit is not None:
            # An explicit request takes precedence over inference (TUL-006 §3.3).
            return [self._row(served[explicit], 1.0, "named explicitly")]
        return [
            self._row(served[w], s, why) for w, s, why in self._ranked(message, limit, org, served)
        ]

    def _ranked(
        self, message: str, limit: int, org: str | None, served: dict[str, WorkflowManifest]
    ) -> list[tuple[str, float, str]]:
        with self._lock:
            ranked = self._indexed(org, served).explain(message, limit)
        # Only the explicit id reaches 1.0, so that it always ranks first.
        return [
            (r.workflow_id, min(r.score, 0.99), r.why) for r in ranked if r.workflow_id in served
        ]

    def _indexed(self, org: str | None, served: dict[str, WorkflowManifest]) -> WorkflowMatcher:
        """The matcher of ``org``'s served set, rebuilt if the set changed (lock held)."""
        # Orgs without workflows of their own share the deployment-wide index.
        key = org if org is not None and self._authored.get(org) else None
        indexed = self._indexes.get(key)
        if indexed is None or indexed[0] != self.revision:
            matcher = self._matcher if key is None else self._org_matcher(indexed)
            matcher.rebuild(
                m
                for m in (served[w] for w in sorted(served))
                if m.visibility is not WorkflowVisibility.HIDDEN
                and m.status is not WorkflowStatus.DRAFT
            )
            indexed = (self.revision, matcher)
            self._indexes[key] = indexed
        return indexed[1]

    async def match_async(
        self,
        message: str,
        limit: int = DEFAULT_MATCH_LIMIT,
        org: str | None = None,
        *,
        run: Runner = _in_thread,
    ) -> list[WorkflowMatch]:
        """:meth:`match`, with the model as arbiter when one is configured and wanted.

        The blocking part (encoding, ranking) goes through ``run`` (the tool passes the
        built-in worker pool, where no user tool can hold it up). The arbiter sees only
        candidates ``org`` may run: never a hidden, disabled or other org's workflow. On any
        failure of the model the ranker and the gate decide.
        """
        arbiter = self.arbiter
        served = self._served(org)
        if (
            arbiter is None
            or arbiter.mode == "off"
            or self._explicit(message, served, org) is not None
        ):
            matched: list[WorkflowMatch] = await run(self.match, message, limit, org)
            return matched

        def decide() -> tuple[Any, WorkflowMatcher, int]:
            with self._lock:
                matcher = self._indexed(org, served)
                return matcher.decide(message), matcher, self.revision

        decision, matcher, revision = await run(decide)
        fallback = [
            self._row(served[w], min(s, 0.99), matcher.why(message, w))
            for w, s in decision.matches(limit)
            if w in served
        ]
        if not decision.ranked or not arbiter.wanted(decision.unsure):
            return fallback
        shown = [
            served[w]
            for w, _ in decision.ranked
            if w in served
            and served[w].runnable
            and served[w].visibility is not WorkflowVisibility.HIDDEN
        ]
        answer = await arbiter.choose(message, shown, (org, revision))
        if not answer.valid:
            return fallback
        if answer.workflow_id is None:
            return []
        chosen = served[answer.workflow_id]
        score = max(decision.gate, 0.5) if decision.accepted else 0.5
        row = self._row(
            chosen, round(min(score, 0.99), 4), "chosen by the model among the top candidates"
        )
        return [row, *(m for m in fallback if m.workflow_id != chosen.workflow_id)][:limit]

    def _org_matcher(self, indexed: tuple[int, WorkflowMatcher] | None) -> WorkflowMatcher:
        return indexed[1] if indexed is not None else self._matcher_factory()

    def _row(self, manifest: WorkflowManifest, score: float, why: str) -> WorkflowMatch:
        return WorkflowMatch(
            workflow_id=manifest.workflow_id,
            title=manifest.title,
            match_score=score,
            runnable=manifest.runnable,
            note=status_note(manifest),
            why=why,
        )
