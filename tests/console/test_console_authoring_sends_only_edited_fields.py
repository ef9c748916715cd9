"""The authoring page sends only the fields the person edited.

A stored value the editor cannot show as it is (a note or title with a line break, stored
before such text was refused) is kept as stored by a save of another field, not re-split.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.store import RevisionAction
from tests.console.browser import in_process
from tests.console.conftest import PageFactory

NOTE = "Step 1: ask the dates.\nStep 2: confirm the headcount."


async def _store_old_draft(settings: AptixSettings) -> None:
    """A draft as a release before the one-line rule could store it."""
    manifest = WorkflowManifest.model_validate(
        {
            "workflowId": "cons_wf",
            "title": "Console\ntest",
            "description": "Original description.",
            "userIntentPatterns": ["plan the console test"],
            "notes": [NOTE],
            "status": "draft",
        }
    )
    async with open_runtime(settings) as runtime:
        store = runtime.workflows.store
        await store.append(manifest, RevisionAction.DRAFT, "ada", "local", expected_revision=0)


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = AptixSettings(
        data_dir=Path(tmp_path_factory.mktemp("console-authoring")),
        load_plugins=False,
        semantic_matching=False,
        api_keys=None,
        llm_model=None,
    )
    asyncio.run(_store_old_draft(settings))
    with in_process(settings) as served:
        yield served


def _workflow(url: str) -> dict[str, Any]:
    answer = httpx.post(
        f"{url}/v1/tools/agent_workflow_authoring/invoke",
        json={"arguments": {"operation": "get_workflow", "workflowId": "cons_wf"}},
    )
    result: dict[str, Any] = answer.json()["result"]
    return result


def test_saving_the_description_leaves_a_multi_line_note_and_title_as_stored(
    url: str, open_page: PageFactory
) -> None:
    page = open_page()
    page.goto(f"{url}/console/#/authoring/cons_wf")
    description = page.get_by_label("Description")
    expect(description).to_have_value("Original description.")
    description.fill("Edited description only.")
    page.get_by_role("button", name="Save draft").click()
    status = page.locator(".status-area")
    expect(status).to_have_text("Updated description of draft 'cons_wf'.")
    saved = _workflow(url)
    assert saved["revision"] == 2
    assert saved["workflow"]["description"] == "Edited description only."
    assert saved["workflow"]["notes"] == [NOTE]
    assert saved["workflow"]["title"] == "Console\ntest"

    # A second save sends nothing: what was saved is now what the page shows.
    page.get_by_role("button", name="Save draft").click()
    expect(status).to_have_text("Nothing changed since the last save.")
    assert _workflow(url)["revision"] == 2

    # Editing the notes sends them, one entry a line as the field says.
    page.get_by_label("Notes").fill("Step 1: ask the dates.\nStep 2: confirm the headcount.\nOK")
    page.get_by_role("button", name="Save draft").click()
    expect(status).to_have_text("Updated notes of draft 'cons_wf'.")
    edited = _workflow(url)["workflow"]
    assert edited["notes"] == [*NOTE.split("\n"), "OK"]
    assert edited["title"] == "Console\ntest"
