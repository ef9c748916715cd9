"""The boot message stays bounded: one oversized workflow cannot break every turn of its org."""

from __future__ import annotations

from pathlib import Path

from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel, reply
from aptix.workflows.boot import MAX_BOOT_CHARS, SHORTENED, build_boot_message
from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.registry import WorkflowRegistry
from tests.workflows.conftest import make_manifest


def _oversized(workflow_id: str = "boot_big") -> WorkflowManifest:
    """A workflow published before the manifest limits: 108 kB of description."""
    return make_manifest(
        workflow_id,
        title="Big description",
        description="Plan things. " * 9000,
        userIntentPatterns=[f"plan the big thing number {i}" for i in range(400)],
    )


def test_one_oversized_workflow_is_shortened_and_the_others_stay_whole() -> None:
    small = make_manifest("create_report", userIntentPatterns=["create a sales report"])
    registry = WorkflowRegistry([small])
    registry.publish(_oversized(), org="acme")

    text = build_boot_message(registry, "acme")

    assert len(text) <= MAX_BOOT_CHARS
    assert '## create_report: "Title of create_report"\nSummary: Does create report.\n' in text
    assert '## boot_big: "Big description"\nSummary: Plan things. Plan things.' in text
    summary = next(line for line in text.splitlines() if line.startswith("Summary: Plan"))
    assert summary.endswith("…")
    assert len(summary) < 250
    assert (
        'Intent patterns: "plan the big thing number 0"; "plan the big thing number 1"; '
        '"plan the big thing number 2" (and 397 more)'
    ) in text
    assert text.rstrip().endswith(SHORTENED)
    # Another org's boot message is not touched by it.
    assert build_boot_message(registry, "globex") == build_boot_message(WorkflowRegistry([small]))


def test_a_catalog_too_large_even_shortened_lists_what_fits_and_says_how_many_more() -> None:
    registry = WorkflowRegistry([_oversized(f"flow_{i:03d}") for i in range(300)])

    text = build_boot_message(registry, max_chars=6_000)

    assert len(text) <= 6_000
    listed = [line for line in text.splitlines() if line.startswith("## ")]
    assert listed[0].startswith("## flow_000: ")  # by id, as always
    assert 0 < len(listed) < 300
    assert f"{300 - len(listed)} more workflows are not listed here" in text
    assert "list_workflows and match_workflow find them." in text
    assert build_boot_message(registry, max_chars=6_000) == text  # deterministic


def test_a_catalog_within_the_budget_is_listed_in_full() -> None:
    registry = WorkflowRegistry([make_manifest(f"flow_{i:02d}") for i in range(40)])

    text = build_boot_message(registry)

    assert SHORTENED not in text
    assert "…" not in text
    assert text.count("\n## ") == 40


async def test_a_turn_of_an_org_with_an_oversized_workflow_reaches_the_model(
    runtime: Runtime,
) -> None:
    """Regression: a 108 kB description put every turn of the org over the context budget."""
    runtime.workflows.registry.publish(_oversized(), org="acme")
    created = await runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    model = ScriptedModel.of(reply("Hello."))

    result = await runtime.reasoner(model).execute(
        session_id=created.result.id, org="acme", user="ann", instruction="hi"
    )

    assert (result.kind, result.text) == ("ok", "Hello."), result.error
    system = str(model.requests[0].messages[0]["content"])
    assert '## boot_big: "Big description"' in system
    assert len(system) < MAX_BOOT_CHARS + 10_000
    model.assert_complete()


async def test_a_small_context_budget_gets_a_boot_message_that_leaves_room(
    tmp_path: Path,
) -> None:
    settings = AptixSettings(
        data_dir=tmp_path, load_plugins=False, semantic_matching=False, llm_context_tokens=4_000
    )
    async with open_runtime(settings) as small:
        for i in range(40):  # within every limit, but 40 of them fill 4,000 tokens
            small.workflows.registry.publish(
                make_manifest(f"flow_{i:02d}", description="Plans the thing. " * 100),
                org="acme",
            )
        created = await small.services.sessions.create_session(org="acme", user="ann")
        assert created.result is not None
        model = ScriptedModel.of(reply("Hello."))

        result = await small.reasoner(model).execute(
            session_id=created.result.id, org="acme", user="ann", instruction="hi"
        )

    assert (result.kind, result.text) == ("ok", "Hello."), result.error
    system = str(model.requests[0].messages[0]["content"])
    assert "## flow_00: " in system
    assert SHORTENED in system
