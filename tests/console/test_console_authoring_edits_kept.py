"""The authoring editor keeps what a person typed and says what is stored, truthfully.

Leaving an editor with unsaved edits (a link, Back, a reload) asks first; a save refused
because someone changed the workflow shows the edits to copy; the page is drawn again after a
save or a status change; Validate says when it checked another version than the page shows;
and a disabled version is never said to be served.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Dialog, Page, expect

from aptix.settings import AptixSettings
from tests.console.browser import PHONE, in_process
from tests.console.conftest import PageFactory

FIELDS = {
    "userIntentPatterns": ["order office chairs"],
    "instructionText": "Order the chairs.",
    "permittedTools": ["agent_calculator"],
    "completionCriteria": ["The chairs are ordered."],
}
LEAVE = "This page has edits that are not saved. Leave it and lose them?"


def _author(url: str, **arguments: Any) -> dict[str, Any]:
    answer = httpx.post(
        f"{url}/v1/tools/agent_workflow_authoring/invoke", json={"arguments": arguments}
    )
    result: dict[str, Any] = answer.json()["result"]
    assert result["ok"], result
    return result


def _draft(url: str, workflow_id: str, title: str = "Chairs") -> None:
    _author(url, operation="draft_workflow", workflowId=workflow_id, title=title, description="d")
    _author(url, operation="update_workflow", workflowId=workflow_id, fields=FIELDS)


def _published(url: str, workflow_id: str) -> None:
    _draft(url, workflow_id)
    _author(url, operation="publish_workflow", workflowId=workflow_id)


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = AptixSettings(
        data_dir=Path(tmp_path_factory.mktemp("console-edits")),
        load_plugins=False,
        semantic_matching=False,
        api_keys=None,  # the local user, an admin
        llm_model=None,
    )
    with in_process(settings) as served:
        yield served


def _dialogs(page: Page, accept: bool = False) -> list[str]:
    """Answer every dialog of ``page`` (``accept`` or not); the list of (type: message) seen."""
    seen: list[str] = []

    def answer(dialog: Dialog) -> None:
        seen.append(f"{dialog.type}: {dialog.message}")
        if accept:
            dialog.accept()
        else:
            dialog.dismiss()

    page.on("dialog", answer)
    return seen


def _type_instruction(page: Page, text: str) -> None:
    """Type with the keyboard, as a person does (a reload only asks after a real gesture)."""
    page.locator("#wf-instructionText").click()
    page.keyboard.press("End")
    page.keyboard.type(text)


def _open_editor(page: Page, url: str, workflow_id: str) -> None:
    page.goto(f"{url}/console/#/authoring/{workflow_id}")
    expect(page.locator("#editor-title")).to_contain_text(workflow_id)


# F2: unsaved edits


def test_a_link_away_from_an_unsaved_edit_asks_and_staying_keeps_it(
    url: str, open_page: PageFactory
) -> None:
    _draft(url, "leave_by_link")
    page = open_page()
    seen = _dialogs(page)
    _open_editor(page, url, "leave_by_link")
    _type_instruction(page, " Then sit down.")
    for link in (
        page.get_by_role("link", name="Workflows", exact=True),
        page.get_by_role("link", name="Back to authoring"),
    ):
        link.click()
        expect(page.locator("#wf-instructionText")).to_have_value(
            "Order the chairs. Then sit down."
        )
    assert seen == [f"confirm: {LEAVE}"] * 2
    assert page.evaluate("location.hash") == "#/authoring/leave_by_link"


def test_leaving_an_unsaved_edit_once_confirmed_goes(url: str, open_page: PageFactory) -> None:
    _draft(url, "leave_confirmed")
    page = open_page()
    seen = _dialogs(page, accept=True)
    _open_editor(page, url, "leave_confirmed")
    _type_instruction(page, " Now.")
    page.get_by_role("link", name="Back to authoring").click()
    expect(page.get_by_role("heading", name="Authoring", exact=True)).to_be_visible()
    assert seen == [f"confirm: {LEAVE}"]  # asked once, not again by the address change


def test_back_from_an_unsaved_edit_asks_and_staying_keeps_the_page(
    url: str, open_page: PageFactory
) -> None:
    _draft(url, "leave_by_back")
    page = open_page()
    seen = _dialogs(page)
    page.goto(f"{url}/console/#/authoring")
    page.locator('a[href="#/authoring/leave_by_back"]').click()
    expect(page.locator("#editor-title")).to_contain_text("leave_by_back")
    _type_instruction(page, " Quickly.")
    page.go_back()
    expect(page.locator("#wf-instructionText")).to_have_value("Order the chairs. Quickly.")
    assert page.evaluate("location.hash") == "#/authoring/leave_by_back"
    assert seen == [f"confirm: {LEAVE}"]


def test_a_reload_with_an_unsaved_edit_asks_first(url: str, open_page: PageFactory) -> None:
    _draft(url, "leave_by_reload")
    page = open_page()
    seen = _dialogs(page)
    _open_editor(page, url, "leave_by_reload")
    _type_instruction(page, " Reload me not.")
    with page.expect_event("dialog"):
        page.evaluate("location.reload()")  # the browser asks; staying keeps the page
    expect(page.locator("#wf-instructionText")).to_have_value("Order the chairs. Reload me not.")
    assert seen == ["beforeunload: "]


def test_a_saved_edit_leaves_without_asking(url: str, open_page: PageFactory) -> None:
    _draft(url, "leave_saved")
    page = open_page()
    seen = _dialogs(page)
    _open_editor(page, url, "leave_saved")
    _type_instruction(page, " Saved.")
    page.get_by_role("button", name="Save draft").click()
    expect(page.locator(".status-area")).to_contain_text("Updated instructionText")
    page.get_by_role("link", name="Back to authoring").click()
    expect(page.get_by_role("heading", name="Authoring", exact=True)).to_be_visible()
    assert seen == []


def test_a_save_refused_as_stale_shows_the_edits_to_copy_and_keeps_them(
    url: str, open_page: PageFactory
) -> None:
    _draft(url, "stale_save")
    page = open_page()
    _open_editor(page, url, "stale_save")
    _author(url, operation="update_workflow", workflowId="stale_save", fields={"notes": ["B"]})
    _type_instruction(page, " Mine.")
    page.get_by_label("Title").fill("My title")
    page.get_by_role("button", name="Save draft").click()
    said = page.locator(".status-area")
    expect(said.get_by_role("alert")).to_have_text(
        "This workflow changed since you opened it, so nothing was changed. Your edits stay in "
        "the fields and are listed below to copy: reloading the page shows the latest version "
        "without them."
    )
    kept = page.get_by_role("region", name="Your edits, not saved")
    expect(kept.locator("h3")).to_have_text(["Title", "Instruction text"])
    expect(kept.locator("pre")).to_have_text(["My title", "Order the chairs. Mine."])
    expect(page.locator("#wf-instructionText")).to_have_value("Order the chairs. Mine.")
    stored = _author(url, operation="get_workflow", workflowId="stale_save")["workflow"]
    assert (stored["title"], stored["notes"]) == ("Chairs", ["B"])


# F3 and F4: the page says what is stored, and is drawn again after a change


def test_a_save_over_a_published_version_redraws_version_status_and_history(
    url: str, open_page: PageFactory
) -> None:
    _published(url, "redrawn_on_save")
    page = open_page()
    _open_editor(page, url, "redrawn_on_save")
    history = page.get_by_role("table", name="Revisions, oldest first").locator("tbody tr")
    expect(history).to_have_count(3)
    page.get_by_label("Notes").fill("a note")
    page.get_by_role("button", name="Save draft").click()
    expect(page.locator(".status-area")).to_contain_text("A new draft version 0.1.1 was created")
    expect(page.locator("#editor-status")).to_have_text(
        "Editing version 0.1.1 (draft). Version 0.1.0 is served."
    )
    expect(page.get_by_label("Version", exact=True)).to_have_value("0.1.1")
    expect(history).to_have_count(4)
    page.get_by_role("button", name="Publish…").click()
    expect(page.locator("#publish-change")).to_have_text("Version 0.1.0 → 0.1.1")


def test_a_status_change_redraws_the_line_and_the_history_and_disabled_is_not_served(
    url: str, open_page: PageFactory
) -> None:
    _published(url, "disabled_here")
    page = open_page()
    _open_editor(page, url, "disabled_here")
    page.get_by_label("Status", exact=True).select_option("disabled")
    page.get_by_role("button", name="Change status").click()
    expect(page.get_by_role("status").filter(has_text="is now disabled")).to_be_visible()
    line = "Editing version 0.1.0 (disabled). Version 0.1.0 is disabled (not served)."
    expect(page.locator("#editor-status")).to_have_text(line)
    history = page.get_by_role("table", name="Revisions, oldest first").locator("tbody tr")
    expect(history).to_have_count(4)
    expect(history.last).to_contain_text("disabled")
    page.reload()
    expect(page.locator("#editor-status")).to_have_text(line)
    # A draft over it: the server's message, the editor and the list say it is not served.
    page.get_by_label("Notes").fill("back soon")
    page.get_by_role("button", name="Save draft").click()
    expect(page.locator(".status-area")).to_contain_text(
        "A new draft version 0.1.1 was created; version 0.1.0 stays disabled (not served) "
        "until the draft is published."
    )
    expect(page.locator("#editor-status")).to_have_text(
        "Editing version 0.1.1 (draft). Version 0.1.0 is disabled (not served)."
    )
    page.get_by_role("link", name="Back to authoring").click()
    row = page.get_by_role("row").filter(has_text="disabled_here")
    expect(row.locator('td[data-label="Version"]')).to_have_text(
        "0.1.1 (0.1.0 disabled, not served)"
    )
    expect(page.locator("main")).not_to_contain_text("is served")


# F5: Validate in a tab left behind


def test_validate_in_a_stale_tab_says_it_checked_another_version(
    url: str, open_page: PageFactory
) -> None:
    _draft(url, "stale_validate")
    page = open_page()
    _open_editor(page, url, "stale_validate")
    fields = {"permittedTools": ["no_such_tool_xyz"]}
    _author(url, operation="update_workflow", workflowId="stale_validate", fields=fields)
    page.get_by_role("button", name="Validate").click()
    expect(page.locator(".status-area").get_by_role("alert")).to_have_text(
        "This workflow changed since you opened it, so Validate checked a version this page "
        "does not show. Reload the page to see the latest version."
    )
    expect(page.locator("#wf-permittedTools")).to_have_value("agent_calculator")
    expect(page.locator("#wf-permittedTools-error")).to_have_text("")
    expect(page.locator("[aria-invalid]")).to_have_count(0)


def test_validate_of_the_page_s_own_version_marks_its_problems(
    url: str, open_page: PageFactory
) -> None:
    _draft(url, "own_validate")
    _author(
        url,
        operation="update_workflow",
        workflowId="own_validate",
        fields={"permittedTools": ["no_such_tool_xyz"]},
    )
    page = open_page()
    _open_editor(page, url, "own_validate")
    page.get_by_role("button", name="Validate").click()
    expect(page.locator("#wf-permittedTools-error")).to_contain_text("no_such_tool_xyz")


# F6: long words on the manifest page


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800}, PHONE])
def test_a_manifest_of_long_words_fits_the_window(
    url: str, open_page: PageFactory, viewport: dict[str, int]
) -> None:
    workflow_id = f"long_words_{viewport['width']}"
    _author(
        url,
        operation="draft_workflow",
        workflowId=workflow_id,
        title="Q" * 200,
        description="D" * 1700 + " https://example.test/" + "u" * 270,
    )
    long_fields = {
        **FIELDS,
        "userIntentPatterns": ["P" * 200],
        "completionCriteria": ["C" * 200],
        "notes": ["N" * 200],
    }
    _author(url, operation="update_workflow", workflowId=workflow_id, fields=long_fields)
    _author(url, operation="publish_workflow", workflowId=workflow_id)
    page = open_page(viewport=viewport)
    page.goto(f"{url}/console/#/workflows/{workflow_id}")
    expect(page.get_by_role("heading", level=1)).to_contain_text("QQQQ")
    expect(page.locator("main li").first).to_be_visible()
    width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], width
