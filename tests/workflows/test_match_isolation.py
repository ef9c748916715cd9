"""One org's index rebuild holds up the matches of that org alone, on the shared worker pool too.

Matching runs on the built-in worker pool (:func:`~aptix.tools.bulkhead.run_builtin`, four
threads). A match that waited there for its org's rebuild held a thread while it did: a few
matches of an org whose large workflow was being indexed took every thread, and every other
org's matches queued behind them (22 s instead of 0.04 s; 504 at 25,000 patterns).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable

import pytest

from aptix.tools.bulkhead import run_builtin
from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.matching.combined import WorkflowMatcher
from aptix.workflows.registry import WorkflowRegistry
from tests.workflows.conftest import make_manifest

#: More matches of the rebuilding org than the built-in pool has threads.
WAITING_MATCHES = 12


class HeldMatcher(WorkflowMatcher):
    """A real matcher that counts its rebuilds; ``held``, it stays in the first until released."""

    def __init__(self, *, held: bool = False, fails: int = 0) -> None:
        super().__init__()
        self.rebuilds = 0
        self.fails = fails
        self.entered = threading.Event()
        self.release = threading.Event()
        if not held:
            self.release.set()

    def rebuild(self, manifests: Iterable[WorkflowManifest]) -> None:
        self.rebuilds += 1
        self.entered.set()
        assert self.release.wait(30)
        if self.fails:
            self.fails -= 1
            raise RuntimeError("the index could not be built")
        super().rebuild(manifests)


class Orgs:
    """A registry serving its own workflows to acme, then to globex with a matcher given."""

    def __init__(self) -> None:
        self.made: list[WorkflowMatcher] = []
        self._next: WorkflowMatcher | None = None
        catalog = [make_manifest("plan_offsite", userIntentPatterns=["plan the team offsite"])]
        self.registry = WorkflowRegistry(
            catalog, matcher=WorkflowMatcher(), matcher_factory=self._make
        )
        self.registry.publish(
            make_manifest("acme_audit", userIntentPatterns=["run the acme audit"]), org="acme"
        )
        # Acme's and the deployment-wide indexes are built before globex publishes.
        assert self.registry.match("run the acme audit", org="acme")[0].workflow_id == "acme_audit"

    def _make(self) -> WorkflowMatcher:
        made, self._next = self._next or WorkflowMatcher(), None
        self.made.append(made)
        return made

    def globex_publishes(self, matcher: HeldMatcher) -> None:
        self._next = matcher
        self.registry.publish(
            make_manifest("globex_review", userIntentPatterns=["review the globex accounts"]),
            org="globex",
        )

    async def match(self, message: str, org: str | None) -> list[str]:
        found = await self.registry.match_async(message, org=org, run=run_builtin)
        return [m.workflow_id for m in found]


async def _entered(matcher: HeldMatcher) -> None:
    assert await asyncio.to_thread(matcher.entered.wait, 10)


async def test_other_orgs_match_on_the_pool_while_one_orgs_index_rebuilds() -> None:
    orgs = Orgs()
    globex = HeldMatcher(held=True)
    orgs.globex_publishes(globex)
    waiting = [
        asyncio.create_task(orgs.match("review the globex accounts", "globex"))
        for _ in range(WAITING_MATCHES)
    ]
    try:
        await _entered(globex)
        # Globex's rebuild is under way and its matches wait: acme's, and those of an org with
        # no workflows of its own, go through the same pool meanwhile.
        acme = await asyncio.wait_for(orgs.match("run the acme audit", "acme"), 10)
        other = await asyncio.wait_for(orgs.match("plan the team offsite", "initech"), 10)
        assert (acme[:1], other[:1]) == (["acme_audit"], ["plan_offsite"])
        assert not any(task.done() for task in waiting)
    finally:
        globex.release.set()
    results = await asyncio.wait_for(asyncio.gather(*waiting), 10)
    assert all(found[:1] == ["globex_review"] for found in results)
    assert globex.rebuilds == 1  # once for every waiting match


async def test_matches_that_give_up_on_a_rebuild_leave_nothing_behind() -> None:
    orgs = Orgs()
    globex = HeldMatcher(held=True)
    orgs.globex_publishes(globex)
    given_up = [
        asyncio.create_task(orgs.match("review the globex accounts", "globex"))
        for _ in range(WAITING_MATCHES)
    ]
    try:
        await _entered(globex)
        for task in given_up:  # what the tool's time limit does
            task.cancel()
        await asyncio.gather(*given_up, return_exceptions=True)
        acme = await asyncio.wait_for(orgs.match("run the acme audit", "acme"), 10)
        assert acme[:1] == ["acme_audit"]
    finally:
        globex.release.set()
    found = await asyncio.wait_for(orgs.match("review the globex accounts", "globex"), 10)
    assert found[:1] == ["globex_review"]
    assert globex.rebuilds == 1


async def test_a_failed_rebuild_fails_its_waiters_and_the_next_match_retries() -> None:
    orgs = Orgs()
    globex = HeldMatcher(fails=1)
    orgs.globex_publishes(globex)
    with pytest.raises(RuntimeError, match="could not be built"):
        await orgs.match("review the globex accounts", "globex")
    found = await asyncio.wait_for(orgs.match("review the globex accounts", "globex"), 10)
    assert found[:1] == ["globex_review"]
    # The sync path uses the same index, as the rebuild that succeeded left it.
    assert orgs.registry.match("review the globex accounts", org="globex")[0].workflow_id == (
        "globex_review"
    )
    assert globex.rebuilds == 2


async def test_a_match_takes_the_rebuild_it_waited_for_though_its_org_published_again() -> None:
    # An org re-publishing faster than its index rebuilds made each waiter find the set
    # changed again after every rebuild, and wait for the next one: its matches timed out.
    orgs = Orgs()
    globex = HeldMatcher(held=True)
    orgs.globex_publishes(globex)
    waiting = asyncio.create_task(orgs.match("review the globex accounts", "globex"))
    try:
        await _entered(globex)
        orgs.registry.publish(
            make_manifest("globex_plan", userIntentPatterns=["plan the globex launch"]),
            org="globex",
        )
    finally:
        globex.release.set()
    found = await asyncio.wait_for(waiting, 10)
    assert found[:1] == ["globex_review"]
    assert globex.rebuilds == 1  # served by the index it waited for, not a second rebuild
    # A match that arrives after the publish still waits for an index that has it.
    later = await asyncio.wait_for(orgs.match("plan the globex launch", "globex"), 10)
    assert later[:1] == ["globex_plan"]
    assert globex.rebuilds == 2
