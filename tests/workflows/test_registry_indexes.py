"""Each served set's index is rebuilt when that set changes, and only then.

At 10,000 workflows a rebuild takes about a second, held under the index's lock: a publish
by one org must not make every other org's next match (nor the deployment-wide one) pay it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.matching.combined import WorkflowMatcher
from aptix.workflows.registry import WorkflowRegistry
from tests.workflows.conftest import make_manifest


class CountingMatcher(WorkflowMatcher):
    """A real matcher that counts its rebuilds and can be held inside one."""

    def __init__(self) -> None:
        super().__init__()
        self.rebuilds = 0
        self.entered = threading.Event()
        self.release = threading.Event()
        self.release.set()

    def rebuild(self, manifests: Iterable[WorkflowManifest]) -> None:
        self.rebuilds += 1
        self.entered.set()
        assert self.release.wait(10)
        super().rebuild(manifests)


def _registry() -> tuple[WorkflowRegistry, CountingMatcher, list[CountingMatcher]]:
    made: list[CountingMatcher] = []

    def factory() -> WorkflowMatcher:
        made.append(CountingMatcher())
        return made[-1]

    shared = CountingMatcher()
    catalog = [
        make_manifest("create_report", userIntentPatterns=["create a sales report"]),
        make_manifest("plan_offsite", userIntentPatterns=["plan the team offsite"]),
    ]
    registry = WorkflowRegistry(catalog, matcher=shared, matcher_factory=factory)
    return registry, shared, made


def test_an_orgs_publish_rebuilds_its_own_index_only() -> None:
    registry, shared, made = _registry()
    registry.publish(make_manifest("acme_audit", userIntentPatterns=["run the acme audit"]))
    registry.publish(
        make_manifest("globex_review", userIntentPatterns=["review globex"]), org="globex"
    )
    assert registry.match("create a sales report")[0].workflow_id == "create_report"
    assert registry.match("review globex", org="globex")[0].workflow_id == "globex_review"
    assert shared.rebuilds == 1
    [globex] = made
    assert globex.rebuilds == 1

    registry.publish(make_manifest("acme_only", userIntentPatterns=["acme only task"]), org="acme")
    assert registry.match("acme only task", org="acme")[0].workflow_id == "acme_only"
    registry.match("create a sales report")
    registry.match("review globex", org="globex")
    assert (shared.rebuilds, globex.rebuilds, made[1].rebuilds) == (1, 1, 1)
    # Another org's workflow never reaches this org, nor the deployment-wide set.
    assert all(m.workflow_id != "acme_only" for m in registry.match("acme only task"))
    assert all(m.workflow_id != "acme_only" for m in registry.match("acme only task", org="globex"))

    # A deployment-wide change reaches every index.
    registry.publish(make_manifest("file_task", userIntentPatterns=["do the filed task"]))
    assert registry.match("do the filed task", org="acme")[0].workflow_id == "file_task"
    assert registry.get("file_task", "globex") is not None
    registry.match("do the filed task", org="globex")
    registry.match("do the filed task")
    assert (shared.rebuilds, globex.rebuilds, made[1].rebuilds) == (2, 2, 2)

    # Acme's last workflow removed: it is served the deployment-wide index, as it stands.
    assert registry.remove("acme_only", org="acme")
    assert registry.match("create a sales report", org="acme")[0].workflow_id == "create_report"
    assert registry.get("acme_only", "acme") is None
    assert shared.rebuilds == 2


def test_a_sync_rebuilds_only_the_orgs_whose_sets_changed() -> None:
    registry, shared, made = _registry()
    acme = {"acme_a": make_manifest("acme_a", userIntentPatterns=["acme first task"])}
    globex = {"globex_a": make_manifest("globex_a", userIntentPatterns=["globex first task"])}
    assert registry.replace_authored({"acme": acme, "globex": globex})
    for org, message in (("acme", "acme first task"), ("globex", "globex first task"), (None, "x")):
        registry.match(message, org=org)
    counts = [shared.rebuilds, *(m.rebuilds for m in made)]
    assert counts == [1, 1, 1]

    # The same sets again: nothing changed, nothing is rebuilt.
    assert not registry.replace_authored({"acme": dict(acme), "globex": dict(globex)})
    # Another process published for globex only.
    more = {**globex, "globex_b": make_manifest("globex_b", userIntentPatterns=["globex second"])}
    assert registry.replace_authored({"acme": acme, "globex": more})
    assert registry.match("globex second", org="globex")[0].workflow_id == "globex_b"
    registry.match("acme first task", org="acme")
    registry.match("create a sales report")
    assert [shared.rebuilds, *(m.rebuilds for m in made)] == [1, 1, 2]

    # Globex's workflows are all withdrawn: it falls back to the deployment-wide set.
    assert registry.replace_authored({"acme": acme})
    assert registry.get("globex_b", "globex") is None
    assert registry.match("create a sales report", org="globex")[0].workflow_id == ("create_report")
    assert registry.get("Globex-A", "globex") is None
    assert registry.get("ACME-A", "acme") is not None


def test_one_orgs_rebuild_does_not_hold_up_another_orgs_match() -> None:
    registry, _, made = _registry()
    registry.match("create a sales report")
    registry.publish(make_manifest("acme_a", userIntentPatterns=["acme first task"]), org="acme")
    matched: list[str] = []
    # The next org matcher made is held inside its rebuild until released.
    original = registry._matcher_factory

    def held() -> WorkflowMatcher:
        matcher = original()
        assert isinstance(matcher, CountingMatcher)
        matcher.release.clear()
        return matcher

    registry._matcher_factory = held
    worker = threading.Thread(
        target=lambda: matched.extend(
            m.workflow_id for m in registry.match("acme first task", org="acme")
        )
    )
    worker.start()
    try:
        deadline = time.monotonic() + 10
        while not made and time.monotonic() < deadline:
            time.sleep(0.01)
        assert made
        assert made[0].entered.wait(10)
        # Acme's rebuild is under way: the deployment-wide set and other orgs still match.
        assert registry.match("create a sales report")[0].workflow_id == "create_report"
        assert registry.match("plan the team offsite", org="globex")[0].workflow_id == (
            "plan_offsite"
        )
        assert registry.get("ACME_A", "acme") is not None
    finally:
        made[0].release.set()
        worker.join(10)
    assert matched[:1] == ["acme_a"]
