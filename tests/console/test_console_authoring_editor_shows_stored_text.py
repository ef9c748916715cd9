"""The authoring editor shows what is stored, truthfully.

A bidirectional control in a stored title or note is shown as ``<U+202E>`` in its input, as
every other page shows outside text ("Invoice \\u202Egnp.exe" read "Invoice exe.png" there),
and a deployment-file workflow opens read-only, saying it is served (the page said "Nothing
is published yet." and offered Save draft and Publish).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from aptix.settings import AptixSettings
from tests.console.browser import in_process
from tests.console.conftest import PageFactory

FILE_WORKFLOW = """\
workflowId: {wid}
title: Onboard a customer
description: Sets up a new customer account.
version: 1.0.0
status: {status}
userIntentPatterns: [{pattern}]
instructionText: Collect the details, then create the account.
permittedTools: [agent_calculator]
completionCriteria: [account created]
"""
TITLE = "Invoice \u202egnp.exe"
NOTE = "\u202eevil note"


def _authoring(url: str, **arguments: Any) -> dict[str, Any]:
    answer = httpx.post(
        f"{url}/v1/tools/agent_workflow_authoring/invoke", json={"arguments": arguments}
    )
    result: dict[str, Any] = answer.json()["result"]
    assert result["ok"], result
    return result


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = Path(tmp_path_factory.mktemp("deployment-workflows"))
    (folder / "onboard.yaml").write_text(
        FILE_WORKFLOW.format(wid="onboard", status="published", pattern="onboard a customer")
    )
    (folder / "offboard.yaml").write_text(
        FILE_WORKFLOW.format(wid="offboard", status="disabled", pattern="offboard a customer")
    )
    settings = AptixSettings(
        data_dir=Path(tmp_path_factory.mktemp("console-editor")),
        load_plugins=False,
        semantic_matching=False,
        api_keys=None,
        llm_model=None,
        workflows_path=folder,
    )
    with in_process(settings) as served:
        _authoring(
            served, operation="draft_workflow", workflowId="bidi_flow", title=TITLE, description="d"
        )
        _authoring(
            served,
            operation="update_workflow",
            workflowId="bidi_flow",
            fields={"notes": [NOTE, "plain note"]},
        )
        yield served


def test_a_bidi_control_in_a_stored_field_is_shown_not_obeyed(
    url: str, open_page: PageFactory
) -> None:
    page = open_page()
    page.goto(f"{url}/console/#/authoring/bidi_flow")
    title = page.locator("#wf-title")
    expect(title).to_have_value("Invoice <U+202E>gnp.exe")
    expect(page.locator("#wf-notes")).to_have_value("<U+202E>evil note\nplain note")
    marked = "Holds control or invisible characters, shown as ␛ or <U+XXXX>"
    expect(page.locator(".field").filter(has=title)).to_contain_text(marked)
    expect(page.locator(".field").filter(has=page.locator("#wf-description"))).not_to_contain_text(
        marked
    )
    expect(page.locator("#editor-status")).to_have_text(
        "Editing version 0.1.0 (draft). Nothing is published yet."
    )

    # A save of another field leaves the marked fields as stored.
    page.get_by_label("Description").fill("Edited.")
    page.get_by_role("button", name="Save draft").click()
    expect(page.locator(".status-area")).to_have_text("Updated description of draft 'bidi_flow'.")
    stored = _authoring(url, operation="get_workflow", workflowId="bidi_flow")["workflow"]
    assert (stored["title"], stored["notes"]) == (TITLE, [NOTE, "plain note"])


def test_a_deployment_file_workflow_opens_read_only_and_says_it_is_served(
    url: str, open_page: PageFactory
) -> None:
    page = open_page()
    page.goto(f"{url}/console/#/authoring")
    row = page.get_by_role("row").filter(has=page.get_by_text("onboard", exact=True))
    expect(row).to_contain_text("no: built in or from a deployment file")
    row.get_by_role("link", name="Onboard a customer").click()  # listed, and it opens
    expect(page).to_have_url(f"{url}/console/#/authoring/onboard")
    expect(page.locator("#editor-status")).to_have_text(
        "Version 1.0.0 (published) comes from a deployment file and is read-only here: it "
        "changes through its file and a review. It is served."
    )
    expect(page.locator("#wf-title")).to_have_value("Onboard a customer")
    expect(page.locator("#wf-title")).not_to_be_editable()
    expect(page.locator("#wf-requiresApproval")).to_be_disabled()
    for name in ("Save draft", "Validate", "Publish…", "Change status"):
        expect(page.get_by_role("button", name=name)).to_have_count(0)
    expect(page.locator("main")).not_to_contain_text("Nothing is published yet.")


def test_a_disabled_deployment_file_workflow_is_said_not_to_be_served(
    url: str, open_page: PageFactory
) -> None:
    page = open_page()
    page.goto(f"{url}/console/#/authoring/offboard")
    expect(page.locator("#editor-status")).to_have_text(
        "Version 1.0.0 (disabled) comes from a deployment file and is read-only here: it "
        "changes through its file and a review. It is not served."
    )
