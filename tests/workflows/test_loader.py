from __future__ import annotations

import logging
from pathlib import Path

import pytest

from aptix.errors import ConfigurationError
from aptix.runtime import BUILTIN_TOOLS
from aptix.workflows.loader import collect_catalog, load_builtin, load_catalog
from aptix.workflows.services import build_workflow_services
from aptix.workflows.store import InMemoryWorkflowStore, RevisionAction
from tests.workflows.conftest import KNOWN_TOOLS, make_manifest

GOOD = """\
workflowId: {wid}
title: Plan a trip
description: Plans a trip.
version: 1.0.0
userIntentPatterns: [plan a trip]
instructionText: Ask where to.
permittedTools: [agent_calculator]
completionCriteria: [The trip is planned.]
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_builtin_workflows_are_valid_and_use_only_real_tools() -> None:
    loaded = load_catalog([t.TOOL_NAME for t in BUILTIN_TOOLS])
    ids = [item.manifest.workflow_id for item in loaded]
    assert len(ids) >= 4
    assert {
        "author_workflow",
        "review_and_publish_workflow",
        "choose_mode",
        "guided_calculation",
    } <= set(ids)
    assert all(item.source.startswith("builtin:") for item in loaded)


def test_a_folder_adds_workflows_and_replaces_builtins_with_the_same_id(tmp_path: Path) -> None:
    write(tmp_path, "trip.yaml", GOOD.format(wid="plan_trip"))
    write(tmp_path, "calc.yaml", GOOD.format(wid="guided_calculation"))
    write(tmp_path, "notes.txt", "ignored")
    loaded = {item.manifest.workflow_id: item for item in load_catalog(KNOWN_TOOLS, tmp_path)}
    assert "plan_trip" in loaded
    assert loaded["guided_calculation"].manifest.title == "Plan a trip"
    assert loaded["guided_calculation"].source == str(tmp_path / "calc.yaml")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            GOOD.format(wid="trip").replace("instructionText: Ask where to.\n", ""),
            "(workflow 'trip', field 'instructionText'): instructionText is missing.",
        ),
        (
            GOOD.format(wid="trip").replace("[agent_calculator]", "[agent_teleport]"),
            "(workflow 'trip', field 'permittedTools.0'): "
            "permittedTools names an unknown tool 'agent_teleport'.",
        ),
        (
            GOOD.format(wid="trip").replace("1.0.0", "1.0"),
            "(workflow 'trip', field 'version'): version: '1.0' is not a semantic version",
        ),
        (
            GOOD.format(wid="trip") + "visibility: hidden\nautoStart: true\n",
            "(workflow 'trip', field 'autoStart'): A hidden workflow cannot be autoStart",
        ),
        (
            GOOD.format(wid="trip") + "status: draft\n",
            "(workflow 'trip', field 'status'): a workflow file cannot hold a draft.",
        ),
        (
            GOOD.format(wid="trip") + "colour: red\n",
            "(workflow 'trip', field 'colour'): 'colour' is not a workflow manifest field.",
        ),
        ("workflowId: [unclosed\n", "is not valid YAML"),
        ("- just a list\n", "A workflow manifest must be a mapping of fields."),
    ],
)
def test_start_up_refuses_a_broken_manifest_naming_file_workflow_and_field(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = write(tmp_path, "trip.yaml", text)
    with pytest.raises(ConfigurationError) as caught:
        load_catalog(KNOWN_TOOLS, tmp_path)
    assert str(path) in str(caught.value)
    assert expected in str(caught.value)


def test_duplicate_ids_in_a_folder_are_refused(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", GOOD.format(wid="trip"))
    write(tmp_path, "b.yaml", GOOD.format(wid="trip"))
    with pytest.raises(
        ConfigurationError, match=r"duplicate workflow id 'trip' \(also defined in .*a.yaml\)"
    ):
        load_catalog(KNOWN_TOOLS, tmp_path)


def test_every_problem_is_reported_even_after_a_type_error(tmp_path: Path) -> None:
    text = (
        GOOD.format(wid="trip")
        .replace("1.0.0", "1.0")
        .replace("[agent_calculator]", "[agent_teleport]")
    )
    write(tmp_path, "trip.yaml", text)
    loaded, problems = collect_catalog(KNOWN_TOOLS, tmp_path)
    assert {p.field for p in problems} == {"version", "permittedTools.0"}
    assert "trip" not in {item.manifest.workflow_id for item in loaded}


def test_a_missing_folder_is_a_problem(tmp_path: Path) -> None:
    _, problems = collect_catalog(KNOWN_TOOLS, tmp_path / "nope")
    assert "is not a folder of workflow files" in str(problems[0])


def test_a_single_file_can_be_checked(tmp_path: Path) -> None:
    path = write(tmp_path, "trip.yaml", GOOD.format(wid="trip"))
    loaded, problems = collect_catalog(KNOWN_TOOLS, path)
    assert problems == []
    assert "trip" in {item.manifest.workflow_id for item in loaded}


def test_builtin_loading_has_no_problems() -> None:
    loaded, problems = load_builtin()
    assert problems == []
    assert all(item.complete for item in loaded)


async def test_published_workflows_are_served_at_start_up() -> None:
    store = InMemoryWorkflowStore()
    draft = make_manifest("authored", status="draft")
    await store.append(draft, RevisionAction.DRAFT, "ann", "acme")
    await store.append(make_manifest("authored"), RevisionAction.PUBLISH, "ann", "acme")
    pending = make_manifest("pending", status="draft")
    await store.append(pending, RevisionAction.DRAFT, "ann", "acme")
    services = build_workflow_services(store)
    services.load_files(KNOWN_TOOLS, None)
    await services.load_published()
    assert services.registry.get("authored", "acme") is not None
    assert services.registry.get("authored", "globex") is None
    assert services.registry.get("authored") is None
    assert services.registry.source_of("authored", "acme") == "store"
    assert services.registry.get("pending", "acme") is None


async def test_a_published_workflow_that_no_longer_validates_is_left_out_at_start_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # One org's stale workflow must not stop the deployment: it is left out with a warning.
    store = InMemoryWorkflowStore()
    await store.append(
        make_manifest("authored", permittedTools=["agent_uninstalled"]),
        RevisionAction.PUBLISH,
        "ann",
        "acme",
    )
    services = build_workflow_services(store)
    services.load_files(KNOWN_TOOLS, None)
    with caplog.at_level(logging.WARNING):
        await services.load_published()
    assert services.registry.get("authored", "acme") is None
    assert "permittedTools names an unknown tool 'agent_uninstalled'" in caplog.text
