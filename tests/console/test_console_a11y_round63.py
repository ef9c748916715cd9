"""The console for keyboard, screen-reader and narrow-screen users, in a real Chromium.

"Skip to content" moves focus to the page's main region without routing ("#main" opened a
"Not found" page and lost unsaved edits); focus goes somewhere sensible after an action that
removes, hides or disables the control that had it (it fell to the start of the page); the
console's tables name every cell at 640 px and below (the headings were moved off screen and
the numbers were left unnamed); and a field's hint is part of its accessible description (only
its error was).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from aptix.settings import AptixSettings
from aptix.testing import call, reply
from aptix.testing.server import ScriptedOpenAIServer, Step
from tests.console.browser import in_process
from tests.console.conftest import PageFactory
from tests.console.model import respond

KEYS = "key-a=acme:ann:admin,key-p=paging:pat:admin"
A = {"Authorization": "Bearer key-a"}
P = {"Authorization": "Bearer key-p"}
NARROW = {"width": 320, "height": 800}
#: A result longer than the 4,000 characters a tool call shows before "Show the whole result".
LONG_NAME = "y" * 5000


def _respond(body: dict[str, Any]) -> Step:
    """The console tests' model, with two approvals in one answer and one long result."""
    last = body["messages"][-1]
    text = str(last.get("content") or "")
    if last["role"] == "user" and text == "approve both":
        first = {"prompt": "Archive the report?", "action": "archive report"}
        second = {"prompt": "Email the team?", "action": "email team"}
        return reply(
            None,
            call("request_user_approval", first, id="both-1"),
            call("request_user_approval", second, id="both-2"),
        )
    if last["role"] == "user" and text == "long result":
        return reply(None, call("agent_hello_world", {"name": LONG_NAME}, id="long-1"))
    if last["role"] == "user" and text == "a table":
        return reply("| Region | Revenue |\n| - | - |\n| North | 12 |")
    return respond(body)


def _authoring(url: str, **arguments: Any) -> dict[str, Any]:
    answer = httpx.post(
        f"{url}/v1/tools/agent_workflow_authoring/invoke",
        json={"arguments": arguments},
        headers=A,
        timeout=60,
    )
    result: dict[str, Any] = answer.json()["result"]
    assert result["ok"], result
    return result


def _draft(url: str, workflow_id: str, title: str = "A probe") -> None:
    """A draft that validates, so that the editor can publish it."""
    _authoring(
        url, operation="draft_workflow", workflowId=workflow_id, title=title, description="d"
    )
    fields = {
        "userIntentPatterns": [f"run {workflow_id}"],
        "instructionText": "Do the thing.",
        "permittedTools": ["agent_calculator"],
        "completionCriteria": ["It was done."],
    }
    _authoring(url, operation="update_workflow", workflowId=workflow_id, fields=fields)


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ScriptedOpenAIServer(respond=_respond) as llm:
        settings = AptixSettings(
            data_dir=Path(tmp_path_factory.mktemp("console-a11y")),
            load_plugins=False,
            semantic_matching=False,
            api_keys=KEYS,
            llm_model="scripted",
            llm_base_url=llm.base_url,
            llm_max_retries=0,
        )
        with in_process(settings) as served:
            yield served


def _chat(page: Page, url: str) -> None:
    page.goto(f"{url}/console/#/chat")
    expect(page.locator("#chat-mode")).to_have_text("general")


# F1: "Skip to content"


def test_skip_to_content_focuses_main_and_keeps_the_page_and_an_unsaved_edit(
    url: str, open_page: PageFactory
) -> None:
    _draft(url, "skip_probe")
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/authoring/skip_probe")
    instruction = page.get_by_label("Instruction text")
    instruction.fill("unsaved edit")
    entries = page.evaluate("history.length")
    page.get_by_role("link", name="Chat", exact=True).focus()
    page.keyboard.press("Shift+Tab")
    skip = page.get_by_role("link", name="Skip to content")
    expect(skip).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()
    assert page.evaluate("location.hash") == "#/authoring/skip_probe"
    assert page.evaluate("history.length") == entries
    expect(page).to_have_title("Authoring · Aptix console")
    expect(page.get_by_role("heading", name="Workflow skip_probe")).to_be_visible()
    expect(instruction).to_have_value("unsaved edit")
    # The next Tab goes on inside the page, past the navigation.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.closest('main') !== null")


def test_an_in_page_fragment_in_the_address_is_not_a_page(url: str, open_page: PageFactory) -> None:
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#main")
    expect(page.get_by_role("heading", name="Chat")).to_be_visible()
    page.get_by_role("link", name="Sessions").click()
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()
    page.evaluate("location.hash = '#main'")  # as a native jump to the fragment would
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()
    expect(page.get_by_text("Not found")).to_have_count(0)


def test_skip_to_content_on_the_sign_in_screen_focuses_the_key_field(
    url: str, open_page: PageFactory
) -> None:
    page = open_page()
    page.goto(f"{url}/console/")
    key = page.get_by_label("API key")
    expect(key).to_be_focused()
    page.get_by_role("link", name="Skip to content").focus()
    page.keyboard.press("Enter")
    expect(key).to_be_focused()
    assert page.evaluate("location.hash") == ""


# F2: focus after an action


def test_signing_in_moves_focus_to_main(url: str, open_page: PageFactory) -> None:
    page = open_page()
    page.goto(f"{url}/console/")
    page.get_by_label("API key").fill("key-a")
    page.get_by_role("button", name="Sign in").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Chat")).to_be_visible()
    expect(page.locator("main")).to_be_focused()


def test_the_send_button_leaves_focus_in_the_message_box(url: str, open_page: PageFactory) -> None:
    page = open_page(key="key-a")
    _chat(page, url)
    message = page.get_by_label("Message")
    message.fill("hello there")
    page.get_by_role("button", name="Send").focus()
    page.keyboard.press("Enter")
    expect(page.locator(".msg.assistant").last).to_contain_text("Echo: hello there")
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    expect(message).to_be_focused()


def test_cancel_turn_leaves_focus_in_the_message_box(url: str, open_page: PageFactory) -> None:
    page = open_page(key="key-a")
    _chat(page, url)
    message = page.get_by_label("Message")
    message.fill("slow")
    message.press("Enter")
    cancel = page.get_by_role("button", name="Cancel turn")
    expect(cancel).to_be_enabled()
    cancel.focus()
    page.keyboard.press("Enter")
    expect(page.locator(".transcript")).to_contain_text("Turn cancelled.")
    expect(cancel).to_be_disabled()
    expect(message).to_be_focused()


def test_an_answered_approval_moves_focus_to_the_next_card_then_the_message_box(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    _chat(page, url)
    page.get_by_label("Message").fill("approve both")
    page.get_by_label("Message").press("Enter")
    cards = page.get_by_role("region", name="Approval needed")
    expect(cards).to_have_count(2)
    cards.first.get_by_role("button", name="Approve").focus()
    page.keyboard.press("Enter")
    expect(cards.nth(1).get_by_role("button", name="Approve")).to_be_focused()
    page.keyboard.press("Tab")  # to Deny
    page.keyboard.press("Enter")
    expect(page.locator(".msg.assistant").last).to_contain_text("Done.")
    expect(page.get_by_label("Message")).to_be_focused()


def test_a_single_approval_answered_moves_focus_to_the_message_box(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    _chat(page, url)
    page.get_by_label("Message").fill("approve please")
    page.get_by_label("Message").press("Enter")
    card = page.get_by_role("region", name="Approval needed")
    card.get_by_role("button", name="Approve").focus()
    page.keyboard.press("Enter")
    expect(page.locator(".msg.assistant").last).to_contain_text("Approved: the report is deleted.")
    expect(page.get_by_label("Message")).to_be_focused()


def test_showing_a_whole_result_moves_focus_to_the_text(url: str, open_page: PageFactory) -> None:
    page = open_page(key="key-a")
    _chat(page, url)
    page.get_by_label("Message").fill("long result")
    page.get_by_label("Message").press("Enter")
    found = page.locator("details.call").filter(has_text="agent_hello_world")
    found.locator("summary").click()
    show = found.get_by_role("button", name="Show the whole result", exact=False)
    show.focus()
    page.keyboard.press("Enter")
    expect(show).to_have_count(0)
    result = found.locator("pre").nth(1)
    expect(result).to_be_focused()
    assert LONG_NAME in (result.text_content() or "")


def test_paging_the_sessions_moves_focus_to_the_new_page_s_table(
    url: str, open_page: PageFactory
) -> None:
    for index in range(21):
        created = httpx.post(f"{url}/v1/sessions", json={"title": f"s{index}"}, headers=P)
        assert created.status_code == 201, created.text
    page = open_page(key="key-p")
    page.goto(f"{url}/console/#/sessions")
    expect(page.get_by_role("table")).to_contain_text("Sessions 1–20")
    page.get_by_role("button", name="Next page").focus()
    page.keyboard.press("Enter")
    table = page.get_by_role("table")
    expect(table).to_contain_text("Sessions 21–21, most recent first")
    expect(table).to_be_focused()
    page.get_by_role("button", name="Previous page").focus()
    page.keyboard.press("Enter")
    expect(table).to_contain_text("Sessions 1–20, most recent first")
    expect(table).to_be_focused()


def test_older_turns_moves_focus_to_the_turns_heading(url: str, open_page: PageFactory) -> None:
    session = httpx.post(f"{url}/v1/sessions", json={}, headers=A).json()["sessionId"]
    for index in range(21):
        body = {"sessionId": session, "instruction": f"turn {index}"}
        done = httpx.post(f"{url}/v1/agent/execute", json=body, headers=A, timeout=60)
        assert done.status_code == 200, done.text
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/sessions/{session}")
    expect(page.get_by_role("article", name="Turn 21")).to_be_visible()
    page.get_by_role("button", name="Older turns").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("article", name="Turn 1", exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name="Turns")).to_be_focused()


def test_publishing_moves_focus_to_what_the_publish_said(url: str, open_page: PageFactory) -> None:
    _draft(url, "publish_probe")
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/authoring/publish_probe")
    page.get_by_role("button", name="Publish…").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_role("button", name="Publish", exact=True).focus()
    page.keyboard.press("Enter")
    expect(dialog).to_have_count(0)
    said = page.locator(".status-area")
    expect(said).to_have_text("Workflow 'publish_probe' 0.1.0 is published and served from now on.")
    expect(said).to_be_focused()


# F3: tables at 640 px and below


#: Each cell of the console's tables: its column heading, the label shown before it, and
#: whether the headings row is on screen.
CELLS = """() => [...document.querySelectorAll('main table.data')].flatMap((table) => {
  const headings = [...table.querySelectorAll('thead th')];
  const onScreen = headings.some((th) => th.getBoundingClientRect().right > 0);
  return [...table.querySelectorAll('tbody tr')].flatMap((row) => [...row.cells].map((td, i) => ({
    heading: headings[i].textContent,
    label: td.dataset.label ?? null,
    before: getComputedStyle(td, '::before').content,
    onScreen,
  })));
})"""


def _labelled(page: Page) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = page.evaluate(CELLS)
    assert cells, "no table on the page"
    return cells


@pytest.mark.parametrize("width", [320, 640])
def test_at_narrow_widths_every_table_cell_shows_its_column_heading(
    url: str, open_page: PageFactory, width: int
) -> None:
    answer = httpx.post(
        f"{url}/v1/agent/execute", json={"instruction": "hello"}, headers=A, timeout=60
    ).json()
    page = open_page(key="key-a", viewport={"width": width, "height": 800})
    page.goto(f"{url}/console/#/sessions/{answer['sessionId']}")
    calls = page.get_by_role("table", name="Model calls of turn 1")
    expect(calls).to_be_visible()
    for cell in _labelled(page):
        # The headings row is off screen, so each cell says which column it is.
        assert not cell["onScreen"]
        assert cell["label"] == cell["heading"]
        assert cell["before"] == f'"{cell["heading"]}: "', cell
    # What a sighted person reads along a model call's row, label by label.
    prompt = calls.locator("td").nth(1)
    assert prompt.evaluate("td => td.getBoundingClientRect().left") >= 0
    expect(prompt).to_have_attribute("data-label", "Prompt tokens")
    for route in ("#/usage", "#/sessions", "#/authoring", "#/workflows"):
        page.goto(f"{url}/console/{route}")
        expect(page.locator("main table.data").first).to_be_visible()
        for cell in _labelled(page):
            assert cell["label"] == cell["heading"], (route, cell)
            assert cell["before"] == f'"{cell["heading"]}: "', (route, cell)


def test_at_full_width_tables_keep_their_heading_row_and_no_cell_labels(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/usage")
    expect(page.locator("main table.data")).to_be_visible()
    for cell in _labelled(page):
        assert cell["onScreen"]
        assert cell["before"] == "none"


def test_a_markdown_table_keeps_its_heading_row_at_320_px(url: str, open_page: PageFactory) -> None:
    page = open_page(key="key-a", viewport=NARROW)
    _chat(page, url)
    page.get_by_label("Message").fill("a table")
    page.get_by_label("Message").press("Enter")
    heading = page.locator(".msg.assistant .md th").first
    expect(heading).to_have_text("Region")
    assert heading.evaluate("th => th.getBoundingClientRect().left") >= 0
    assert heading.evaluate("th => getComputedStyle(th).display") == "table-cell"
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0


# F4: hints in the accessible description


def test_a_field_hint_is_in_its_accessible_description_with_its_error(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/authoring")
    workflow_id = page.get_by_label("Workflow ID")
    expect(workflow_id).to_have_accessible_description("snake_case, for example onboard_customer.")
    expect(page.get_by_label("Title", exact=True)).to_have_accessible_description("")
    workflow_id.fill("Not Snake")
    page.get_by_role("button", name="Create draft").click()
    expect(workflow_id).to_have_attribute("aria-invalid", "true")
    error = page.locator("#draft-workflowId-error")
    expect(error).not_to_be_empty()
    expect(workflow_id).to_have_accessible_description(
        f"snake_case, for example onboard_customer. {error.text_content()}"
    )


def test_the_control_character_warning_is_in_the_field_s_description(
    url: str, open_page: PageFactory
) -> None:
    _draft(url, "bidi_probe", title="Invoice \u202egnp.exe")
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/authoring/bidi_probe")
    title = page.locator("#wf-title")
    expect(title).to_have_value("Invoice <U+202E>gnp.exe")
    expect(title).to_have_accessible_description(
        "Holds control or invisible characters, shown as ␛ or <U+XXXX> (they could make the "
        "text read otherwise). They stay as stored unless you edit this field; an edit saves "
        "the text as shown."
    )
    expect(page.locator("#wf-notes")).to_have_accessible_description("One per line.")
