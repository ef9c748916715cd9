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
import contextlib
import functools
import logging
import threading
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

from aptix.workflows.manifest import WorkflowManifest, WorkflowStatus, WorkflowVisibility
from aptix.workflows.matching.arbiter import MatchArbiter
from aptix.workflows.matching.combined import RankedWorkflow, WorkflowMatcher
from aptix.workflows.matching.exiting import Stopped, start_tracked
from aptix.workflows.matching.explicit import id_key, keyed, named_in, names_unknown
from aptix.workflows.matching.routing import Decision
from aptix.workflows.validation import FieldProblem, validate_manifest

__all__ = ["WorkflowMatch", "WorkflowRegistry", "status_note"]

DEFAULT_MATCH_LIMIT = 5

_log = logging.getLogger("aptix.workflows")

T = TypeVar("T")

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


@dataclass(slots=True)
class _Index:
    """One served set's matcher, used by one match or rebuild at a time (registry's lock).

    Who finds it in use or stale waits on :attr:`freed`, a future: an async caller waits
    holding no thread, so one org's rebuild holds up no other org's matches, not even through
    the shared worker pool they run on.
    """

    matcher: WorkflowMatcher
    #: The revision of the served set it was built from (-1: never built).
    stamp: int = -1
    #: A match or a rebuild is using the matcher.
    busy: bool = False
    #: Resolved when the matcher is let go (with a rebuild's error, if it failed).
    freed: Future[None] | None = None


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
        # A scope is None (the deployment-wide set, served to every org without workflows of
        # its own) or an org with authored workflows (its own and the deployment-wide ones).
        # What is derived from a scope's set (its index, its id keys, an org's merged set) is
        # rebuilt when that set changes, not when any org publishes: at 10,000 workflows a
        # rebuild takes a second.
        #: scope -> the revision at which it last changed (an org's own workflows only).
        self._changed: dict[str | None, int] = {}
        #: scope -> its matcher
        self._indexes: dict[str | None, _Index] = {}
        #: scope -> (stamp, id_key -> id of its served set)
        self._keys: dict[str | None, tuple[int, dict[str, str]]] = {}
        #: org -> (stamp, its served set), merged once per change rather than per call
        self._merged: dict[str, tuple[int, dict[str, WorkflowManifest]]] = {}
        #: Guards the served sets and the caches above; held briefly, never for a rebuild.
        self._lock = threading.Lock()
        #: Increases whenever any served set changes.
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

    def _scope(self, org: str | None) -> str | None:
        """``org`` if it has workflows of its own, else None (the deployment-wide set)."""
        return org if org is not None and org in self._authored else None

    def _stamp(self, scope: str | None) -> int:
        """The revision at which ``scope``'s served set last changed."""
        base = self._changed.get(None, 0)
        return base if scope is None else max(base, self._changed.get(scope, 0))

    def _changes(self, scope: str | None) -> None:
        """Record a change of ``scope``'s own workflows (lock held)."""
        self.revision += 1
        self._changed[scope] = self.revision

    def _served(self, org: str | None) -> dict[str, WorkflowManifest]:
        if self._scope(org) is None:
            return self._manifests
        with self._lock:
            return self._served_locked(org)

    def _served_locked(self, org: str | None) -> dict[str, WorkflowManifest]:
        scope = self._scope(org)
        if scope is None:
            return self._manifests
        stamp = self._stamp(scope)
        merged = self._merged.get(scope)
        if merged is None or merged[0] != stamp:
            # Deployment-wide workflows win: authoring cannot shadow a reviewed file.
            merged = (stamp, {**self._authored[scope], **self._manifests})
            self._merged[scope] = merged
        return merged[1]

    def get(self, workflow_id: str, org: str | None = None) -> WorkflowManifest | None:
        """The manifest ``org`` is served under ``workflow_id`` (any visibility or status)."""
        served = self._served(org)
        found = served.get(workflow_id)
        if found is None:
            wid = self._keyed(org).get(id_key(workflow_id))
            found = None if wid is None else served.get(wid)
        return found

    def _keyed(self, org: str | None) -> dict[str, str]:
        """``org``'s served ids by :func:`id_key`, built once per change, not per call."""
        with self._lock:
            scope = self._scope(org)
            stamp = self._stamp(scope)
            cached = self._keys.get(scope)
            if cached is None or cached[0] != stamp:
                cached = (stamp, keyed(self._served_locked(scope)))
                self._keys[scope] = cached
            return cached[1]

    def _explicit(
        self, message: str, served: dict[str, WorkflowManifest], org: str | None
    ) -> list[WorkflowMatch] | None:
        """The answer to a message that names a workflow explicitly (TUL-006 §3.3), else None.

        One row for a served workflow; none for an id no served workflow has ("use workflow:
        nosuch" asks for that one, not for whichever shares the words "use workflow").
        """
        if "workflow" not in message.casefold():
            return None
        by_key = self._keyed(org)
        named = named_in(message, by_key)
        # The set may have changed since ``served`` was read: only what it holds is named.
        if named is not None and named in served:
            return [self._row(served[named], 1.0, "named explicitly")]
        return [] if names_unknown(message, by_key) else None

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
            self._changes(None)

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
            self._changes(org)

    def remove(self, workflow_id: str, *, org: str | None = None) -> bool:
        """Stop serving ``workflow_id`` (``org``'s, or deployment-wide with None)."""
        with self._lock:
            own = self._manifests if org is None else self._authored.get(org, {})
            if own.pop(workflow_id, None) is None:
                return False
            if org is None:
                self._sources.pop(workflow_id, None)
            self._changes(org)
            if org is not None and not own:
                self._authored.pop(org, None)
                self._forget(org)
            return True

    def replace_authored(self, authored: dict[str, dict[str, WorkflowManifest]]) -> bool:
        """Serve exactly ``authored`` (org -> id -> manifest); True when anything changed."""
        new = {org: dict(own) for org, own in authored.items() if own}
        with self._lock:
            old = self._authored
            changed = [
                org for org in sorted(new.keys() | old.keys()) if new.get(org) != old.get(org)
            ]
            if not changed:
                return False
            self._authored = new
            self.revision += 1
            # Only the orgs whose own set changed are rebuilt (another process's publish
            # reaches this one as a replacement of every org's set).
            for org in changed:
                self._changed[org] = self.revision
                if org not in new:
                    self._forget(org)
            return True

    def _forget(self, org: str) -> None:
        """Drop what was derived from ``org``'s own set, now empty (lock held)."""
        self._indexes.pop(org, None)
        self._keys.pop(org, None)
        self._merged.pop(org, None)
        self._changed.pop(org, None)

    def match(
        self, message: str, limit: int = DEFAULT_MATCH_LIMIT, org: str | None = None
    ) -> list[WorkflowMatch]:
        """Workflows served to ``org`` whose intent fits ``message``, best first."""
        served = self._served(org)
        explicit = self._explicit(message, served, org)
        if explicit is not None:
            # An explicit request takes precedence over inference (TUL-006 §3.3).
            return explicit
        with self._indexed(org) as matcher:
            return self._rows(matcher.explain(message, limit), served)

    def _rows(
        self, ranked: list[RankedWorkflow], served: dict[str, WorkflowManifest]
    ) -> list[WorkflowMatch]:
        # Only the explicit id reaches 1.0, so that it always ranks first.
        return [
            self._row(served[r.workflow_id], min(r.score, 0.99), r.why)
            for r in ranked
            if r.workflow_id in served
        ]

    def _need(self, org: str | None) -> int:
        """The stamp of ``org``'s served set now: any index built from it or later will do."""
        with self._lock:
            return self._stamp(self._scope(org))

    def _claim(self, org: str | None, need: int) -> _Index | Future[None]:
        """``org``'s index if built from stamp ``need`` or later, now the caller's; else a future.

        The future is what to wait for before claiming again: the index is in use, or older
        than ``need``, and then a rebuild of the current set is started here, on a thread of
        its own (after the deployment-wide index, whose rows an org's borrows). Only the
        matches of that set wait for it, and they hold no thread while they do. A waiter
        takes the index it waited for even if the set changed again meanwhile: an org that
        publishes faster than its index rebuilds would otherwise starve its own matches.
        """
        with self._lock:
            scope = self._scope(org)
            stamp = self._stamp(scope)
            index = self._indexes.get(scope)
            if index is None:
                matcher = self._matcher if scope is None else self._matcher_factory()
                index = self._indexes[scope] = _Index(matcher)
            if not index.busy and index.stamp >= need:
                index.busy = True
                return index
            if index.freed is None:
                index.freed = Future()
                # Running: a waiter that gives up (cancelled, timed out) cannot cancel it.
                index.freed.set_running_or_notify_cancel()
            freed = index.freed
            if not index.busy:
                index.busy = True
                served = self._served_locked(scope)
                matchable = [
                    m
                    for m in (served[w] for w in sorted(served))
                    if m.visibility is not WorkflowVisibility.HIDDEN
                    and m.status is not WorkflowStatus.DRAFT
                ]
                # Tracked: an exiting process (a Ctrl-C during start-up) stops it first.
                start_tracked(
                    functools.partial(self._rebuild, scope, index, matchable, stamp),
                    "aptix-index",
                )
            return freed

    def _rebuild(
        self, scope: str | None, index: _Index, matchable: list[WorkflowManifest], stamp: int
    ) -> None:
        """Rebuild ``index`` (claimed for it) from ``matchable``, then let it go."""
        error: Exception | None = None
        try:
            if scope is not None:
                with self._indexed(None):
                    pass
            index.matcher.rebuild(matchable)
            index.stamp = stamp
        except Stopped as exc:  # the process exits: nobody will match on this index
            error = exc
        except Exception as exc:
            _log.exception("Rebuilding the workflow match index failed")
            error = exc
        finally:
            self._release(index, error)

    def _release(self, index: _Index, error: Exception | None = None) -> None:
        """Let ``index`` go and wake whoever waits for it."""
        with self._lock:
            index.busy = False
            freed, index.freed = index.freed, None
        if freed is None:
            return
        if error is None:
            freed.set_result(None)
        else:
            freed.set_exception(error)

    @contextlib.contextmanager
    def _indexed(self, org: str | None) -> Iterator[WorkflowMatcher]:
        """The matcher of ``org``'s served set, current, the caller's alone for the block.

        Blocks the calling thread while the index is rebuilt or used by another match.
        """
        need = self._need(org)
        claimed = self._claim(org, need)
        while isinstance(claimed, Future):
            claimed.result()
            claimed = self._claim(org, need)
        try:
            yield claimed.matcher
        finally:
            self._release(claimed)

    def _try_index(
        self, org: str | None, need: int, use: Callable[[WorkflowMatcher], T]
    ) -> tuple[T] | Future[None]:
        """``(use(matcher),)`` if ``org``'s index is free and from ``need`` on, else a future."""
        claimed = self._claim(org, need)
        if isinstance(claimed, Future):
            return claimed
        try:
            return (use(claimed.matcher),)
        finally:
            self._release(claimed)

    async def _on_index(
        self, org: str | None, run: Runner, use: Callable[[WorkflowMatcher], T]
    ) -> T:
        """``use(matcher)`` through ``run``; waiting for the index holds none of its threads."""
        need = self._need(org)
        while True:
            tried: tuple[T] | Future[None] = await run(self._try_index, org, need, use)
            if not isinstance(tried, Future):
                return tried[0]
            await asyncio.wrap_future(tried)

    def settle(self, org: str | None = None, timeout: float | None = None) -> bool | None:
        """Index ``org``'s served set and wait for the cascade's larger index behind it.

        True once the cascade serves, False if ``timeout`` passed first, None without a
        cascade: a one-shot command then matches as a running server does.
        """
        with self._indexed(org) as matcher:
            cascade = matcher.cascade
        return None if cascade is None else cascade.wait(timeout)

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
        built-in worker pool, where no user tool can hold it up); waiting for the index (its
        rebuild, another match) is done here, off ``run``'s threads. The arbiter sees only
        candidates ``org`` may run: never a hidden, disabled or other org's workflow. On any
        failure of the model the ranker and the gate decide.
        """
        arbiter = self.arbiter
        served = self._served(org)
        explicit: list[WorkflowMatch] | None = await run(self._explicit, message, served, org)
        if explicit is not None:
            return explicit
        if arbiter is None or arbiter.mode == "off":
            return await self._on_index(
                org, run, lambda matcher: self._rows(matcher.explain(message, limit), served)
            )

        def decide(matcher: WorkflowMatcher) -> tuple[Decision, list[WorkflowMatch]]:
            decision = matcher.decide(message)
            # The reasons are read while the index is still the one that decided.
            fallback = [
                self._row(served[w], min(s, 0.99), matcher.why(message, w))
                for w, s in decision.matches(limit)
                if w in served
            ]
            return decision, fallback

        revision = self.revision
        decision, fallback = await self._on_index(org, run, decide)
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

    def _row(self, manifest: WorkflowManifest, score: float, why: str) -> WorkflowMatch:
        return WorkflowMatch(
            workflow_id=manifest.workflow_id,
            title=manifest.title,
            match_score=score,
            runnable=manifest.runnable,
            note=status_note(manifest),
            why=why,
        )
