"""The console in a real Chromium against ``aptix serve`` with API keys and a scripted model."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page, Route, expect

from aptix.testing.server import ScriptedOpenAIServer
from tests.console.browser import PHONE, VIEWPORT, aptix_serve
from tests.console.conftest import PageFactory
from tests.console.model import HOSTILE, HOSTILE_MARKDOWN, LONG_URL, respond

PREVIEW_CHARS = 4000  # dom.js

KEYS = "key-a=acme:ann:admin,key-b=globex:bob:admin,key-c=initech:cy"
A = {"Authorization": "Bearer key-a"}
B = {"Authorization": "Bearer key-b"}
C = {"Authorization": "Bearer key-c"}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ScriptedOpenAIServer(respond=respond) as llm:
        env = {
            "APTIX_API_KEYS": KEYS,
            "APTIX_LLM_MODEL": "scripted",
            "APTIX_LLM_BASE_URL": llm.base_url,
            "APTIX_LLM_MAX_RETRIES": "0",
            # The 2 MB result the console shortens is over the default 1 MiB tool result limit.
            "APTIX_TOOL_MAX_RESULT_BYTES": str(4 * 1024 * 1024),
        }
        with aptix_serve(tmp_path_factory.mktemp("console"), **env) as served:
            yield served


def test_a_wrong_key_is_refused_on_the_field_and_a_right_one_signs_in(
    url: str, open_page: PageFactory
) -> None:
    page = open_page()
    page.goto(f"{url}/console")
    key = page.get_by_label("API key")
    key.fill("not-a-key")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#api-key-error")).to_have_text(
        "That API key was not accepted. Check it and try again."
    )
    expect(key).to_have_attribute("aria-invalid", "true")
    key.fill("key-a")
    page.get_by_role("button", name="Sign in").click()
    for name in ("Chat", "Sessions", "Modes", "Workflows", "Authoring"):
        expect(page.get_by_role("link", name=name, exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name="Chat")).to_be_visible()
    expect(page.locator("#chat-mode")).to_have_text("general")


def _chat(page: Page, url: str, text: str) -> None:
    page.goto(f"{url}/console/#/chat")
    expect(page.locator("#chat-mode")).to_have_text("general")
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send").click()


def test_chat_streams_and_an_approval_card_answers_the_client_call(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    _chat(page, url, "approve please")
    card = page.get_by_role("region", name="Approval needed")
    expect(card).to_contain_text("Delete the report?")
    expect(card).to_contain_text("delete report")
    expect(card.locator(".destructive-flag")).to_have_text("Yes — this cannot be undone")
    expect(page.locator(".transcript")).to_contain_text("I need your approval first.")
    card.get_by_role("button", name="Approve").click()
    expect(card).to_contain_text("You approved.")
    expect(page.locator(".msg.assistant p").last).to_have_text("Approved: the report is deleted.")
    call = page.locator("details.call").filter(has_text="request_user_approval")
    call.locator("summary").click()
    expect(call).to_contain_text('"prompt": "Delete the report?"')
    expect(page.get_by_role("button", name="Cancel turn")).to_be_disabled()


def test_a_denied_approval_is_posted_as_the_tool_result(url: str, open_page: PageFactory) -> None:
    page = open_page(key="key-a")
    _chat(page, url, "approve please")
    page.get_by_role("region", name="Approval needed").get_by_role("button", name="Deny").click()
    expect(page.locator(".msg.assistant p").last).to_have_text("Denied: nothing was done.")


def test_a_mode_change_shows_the_welcome_message_and_the_new_mode(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    _chat(page, url, "switch to calculation")
    expect(page.locator(".note.mode")).to_have_text("Mode changed from general to calculation.")
    expect(page.locator(".note.welcome")).to_contain_text("Calculation mode")
    expect(page.locator("#chat-mode")).to_have_text("calculation")
    expect(page.locator(".msg.assistant").last).to_contain_text("Now in calculation mode.")
    page.get_by_role("button", name="New session").click()
    expect(page.locator("#chat-session")).to_have_text("new")
    expect(page.locator("#chat-mode")).to_have_text("general")
    expect(page.locator(".transcript")).to_be_empty()


def test_the_active_workflow_is_shown_once_started(url: str, open_page: PageFactory) -> None:
    page = open_page(key="key-a")
    _chat(page, url, "start the calculation workflow")
    expect(page.locator(".msg.assistant p").last).to_have_text(
        "The guided calculation has started."
    )
    expect(page.locator("#chat-workflow")).to_have_text("guided_calculation")
    page.locator("#chat-session a").click()
    expect(page.locator("dl.facts").first).to_contain_text("guided_calculation")


def test_model_html_is_shown_as_text_and_markdown_is_rendered(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    _chat(page, url, "hostile")
    answer = page.locator(".msg.assistant .md").last
    # Raw HTML is text; the javascript: link is not a link; **bold** is bold.
    expect(answer).to_have_text(HOSTILE.replace("**bold**", "bold"))
    transcript = page.locator(".transcript")
    expect(transcript.locator("strong")).to_have_text("bold")
    expect(transcript.locator("script")).to_have_count(0)
    expect(transcript.locator("img")).to_have_count(0)
    expect(transcript.locator("a")).to_have_count(0)
    assert page.evaluate("window.__pwned") is None


#: Every element in the transcript's Markdown that is not one Markdown makes.
FOREIGN_ELEMENTS = """() => [...document.querySelectorAll('.transcript .md *')]
  .map((el) => el.tagName.toLowerCase())
  .filter((tag) => !['a','blockquote','br','code','del','em','h1','h2','h3','h4','h5','h6',
    'hr','li','ol','p','pre','s','strong','table','tbody','td','th','thead','tr','ul']
    .includes(tag))"""


@pytest.mark.parametrize("viewport", [VIEWPORT, PHONE], ids=["1280x800", "phone"])
def test_hostile_markdown_is_sanitised_keeps_its_lines_and_fits_the_width(
    url: str, open_page: PageFactory, viewport: dict[str, int]
) -> None:
    page = open_page(key="key-a", viewport=viewport)
    _chat(page, url, "hostile markdown")
    answer = page.locator(".msg.assistant .md").last
    expect(answer.locator("table")).to_be_visible()  # the whole answer is in
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate(FOREIGN_ELEMENTS) == []
    # Only the http(s) links stay links (the image became a link to it, never loaded).
    hrefs = answer.locator("a").evaluate_all("els => els.map((a) => a.getAttribute('href'))")
    assert sorted(hrefs) == sorted(
        ["https://example.test/ok", "https://example.test/pixel.png", LONG_URL]
    )
    for link in answer.locator("a").all():
        assert link.get_attribute("rel") == "noopener noreferrer nofollow"
    expect(answer.get_by_role("link", name="Image: tracker")).to_be_visible()
    expect(answer).to_contain_text("Image: data")  # a data: image is its alt text
    assert not [a for a in page.locator(".transcript [onclick], .transcript [onerror]").all()]
    # The rest is text, shown as the model wrote it.
    for shown in (
        "[js link](javascript:",
        "<img src=x onerror=",
        "<iframe",
        "<svg onload",
        '<div onclick="window.__pwned=10">html block</div>',
    ):
        expect(answer).to_contain_text(shown)
    expect(answer.locator("h1")).to_have_text("Report")
    # A single newline is a line break: "first line" and "second line" stay two lines.
    assert answer.locator("p").first.evaluate("p => p.innerText") == "first line\nsecond line"
    code = answer.locator("pre code")
    expect(code).to_have_text("<script>window.__pwned = 11</script>\n  indented line\n")
    # The 300-character URL is whole, and nothing is wider than the window or the transcript.
    expect(answer.get_by_role("link", name=LONG_URL)).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
    transcript = page.locator(".transcript")
    assert transcript.evaluate("el => el.scrollWidth - el.clientWidth") <= 0
    assert HOSTILE_MARKDOWN.count("\n") > 20


@pytest.mark.parametrize("viewport", [VIEWPORT, PHONE], ids=["1280x800", "phone"])
def test_a_session_page_renders_the_answer_as_markdown(
    url: str, open_page: PageFactory, viewport: dict[str, int]
) -> None:
    answer = httpx.post(
        f"{url}/v1/agent/execute", json={"instruction": "hostile markdown"}, headers=A, timeout=60
    ).json()
    page = open_page(key="key-a", viewport=viewport)
    page.goto(f"{url}/console/#/sessions/{answer['sessionId']}")
    text = page.get_by_role("article", name="Turn 1").locator(".answer-text .md")
    expect(text.locator("pre code")).to_contain_text("<script>window.__pwned = 11</script>")
    expect(text.get_by_role("link", name=LONG_URL)).to_be_visible()
    assert page.evaluate(FOREIGN_ELEMENTS.replace(".transcript .md", ".answer-text .md")) == []
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0


def test_a_2_mb_tool_result_is_shortened_with_a_way_to_see_it_all(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    _chat(page, url, "big result")
    call = page.locator("details.call").filter(has_text="agent_hello_world")
    expect(call.locator(".call-status")).to_have_text("done")
    call.locator("summary").click()
    show = call.get_by_role("button", name=re.compile(r"Show the whole result \(2,0\d\d,\d{3}"))
    expect(show).to_be_visible()
    result = call.locator("pre").nth(1)
    assert len(result.text_content() or "") == PREVIEW_CHARS
    show.click()
    expect(show).to_have_count(0)
    assert len(result.text_content() or "") > 2_000_000


def test_a_running_turn_can_be_cancelled(url: str, open_page: PageFactory) -> None:
    page = open_page(key="key-a")
    _chat(page, url, "slow")
    thinking = page.get_by_role("status").filter(has_text="Thinking")
    expect(thinking).to_be_visible()  # while the turn runs
    cancel = page.get_by_role("button", name="Cancel turn")
    expect(cancel).to_be_enabled()
    cancel.click()
    expect(page.locator(".transcript")).to_contain_text("Turn cancelled.")
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    expect(thinking).to_have_count(0)


def test_a_lost_stream_offers_a_retry_and_the_turn_runs_once(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    cut = 'event: text_delta\ndata: {"delta": "Ech"}\n\n'

    def drop(route: Route) -> None:
        # The stream ends before turn_finished and the request never reached the server.
        route.fulfill(status=200, headers={"content-type": "text/event-stream"}, body=cut)

    page.route("**/v1/agent/execute", drop)
    _chat(page, url, "say it once")
    alert = page.get_by_role("alert").filter(has_text="The connection was lost")
    expect(alert).to_be_visible()
    page.unroute("**/v1/agent/execute")
    alert.get_by_role("button", name="Retry").click()
    expect(page.locator(".msg.assistant p").last).to_have_text("Echo: say it once")
    session_id = page.locator("#chat-session a").get_attribute("href")
    assert session_id is not None
    shown = httpx.get(f"{url}/v1/sessions/{session_id.rsplit('/', 1)[1]}", headers=A).json()
    assert [t["instruction"] for t in shown["turns"]] == ["say it once"]


def test_a_session_page_shows_mode_history_lineage_and_turns(
    url: str, open_page: PageFactory
) -> None:
    answer = httpx.post(
        f"{url}/v1/agent/execute", json={"instruction": "branch off"}, headers=A, timeout=60
    ).json()
    parent, child = answer["sessionId"], answer["branchedSessionId"]
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/sessions")
    row = page.get_by_role("row").filter(has_text=parent[:8])
    expect(row).to_contain_text("calculation")
    row.get_by_role("link", name=parent[:8]).click()
    expect(page.get_by_role("heading", name=f"Session {parent[:8]}")).to_be_visible()
    history = page.get_by_role("table", name="Mode changes, oldest first")
    expect(history.get_by_role("row").nth(1)).to_contain_text(
        re.compile(r"general\s*calculation\s*numbers in a new session.*ann")
    )
    turn = page.get_by_role("article", name="Turn 1")
    expect(turn).to_contain_text("branch off")
    expect(turn.get_by_role("table", name="Model calls of turn 1")).to_contain_text("scripted")
    expect(turn).to_contain_text("agent_change_mode")
    lineage = page.locator("dl.lineage")
    lineage.get_by_role("link", name=child[:8]).click()
    expect(page.get_by_role("heading", name=f"Session {child[:8]}")).to_be_visible()
    page.locator("dl.lineage").get_by_role("link", name=parent[:8]).click()
    expect(page.get_by_role("heading", name=f"Session {parent[:8]}")).to_be_visible()


def test_a_refused_call_is_listed_with_its_error(url: str, open_page: PageFactory) -> None:
    sid = httpx.post(f"{url}/v1/sessions", json={}, headers=A).json()["sessionId"]
    httpx.post(
        f"{url}/v1/agent/execute",
        json={"sessionId": sid, "instruction": "call a missing tool"},
        headers=A,
        timeout=60,
    )
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/sessions/{sid}")
    # A call Aptix refused (a tool not offered here) is a failed call on record, as is a
    # tool's own error: the page says "failed" and shows the error, whoever wrote it.
    failed = page.get_by_role(
        "table", name="Tool calls that failed, were denied or were cut short, with their error"
    )
    expect(failed).to_contain_text("agent_workflow_authoring")
    cells = failed.get_by_role("row").nth(1).get_by_role("cell")
    expect(cells.nth(2)).to_have_text("failed")
    expect(cells.nth(3)).to_contain_text("is not offered in this mode or workflow")


def test_the_match_playground_shows_candidates_with_scores_and_why(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/workflows")
    listed = page.get_by_role("table", name="Workflows this key can run")
    expect(listed).to_contain_text("Guided calculation")
    expect(listed).not_to_contain_text("workflow_diagnostics")  # hidden
    page.get_by_label("Request").fill("help me calculate a sum")
    page.get_by_role("button", name="Match").click()
    best = page.get_by_role("table", name="Candidates, best first").get_by_role("row").nth(1)
    expect(best).to_contain_text("Guided calculation")
    expect(best.get_by_role("cell").nth(1)).to_have_text(re.compile(r"^[01]\.\d\d$"))
    expect(best).to_contain_text("calculate")
    best.get_by_role("link", name="Guided calculation").click()
    expect(page.get_by_role("heading", name="Guided calculation")).to_be_visible()
    expect(page.locator("main")).to_contain_text("agent_calculator")


def test_modes_list_the_tools_each_offers(url: str, open_page: PageFactory) -> None:
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/modes")
    calculation = page.get_by_role("article", name=re.compile("Calculation"))
    expect(calculation.locator("ul.tools")).to_contain_text("agent_calculator")
    # Each tool's title and declared hints (from /v1/tools) are shown beside it.
    calculator = calculation.locator('li[data-tool="agent_calculator"]')
    expect(calculator).to_contain_text("Calculator")
    expect(calculator).to_contain_text("read-only")
    expect(calculator).not_to_contain_text("destructive")
    approval = page.locator('li[data-tool="request_user_approval"]').first
    expect(approval).to_contain_text("client")


def test_authoring_draft_then_errors_then_fix_then_publish_after_confirmation(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/authoring")
    page.get_by_label("Workflow ID").fill("refund_check")
    page.get_by_label("Title").fill("Refund check")
    page.get_by_label("Description").fill("Checks the status of a refund.")
    page.get_by_role("button", name="Create draft").click()
    expect(page.get_by_role("heading", name="Workflow refund_check")).to_be_visible()
    page.get_by_label("Permitted tools").fill("agent_no_such_tool")
    page.get_by_role("button", name="Validate").click()
    expect(page.locator("#wf-instructionText-error")).to_contain_text("missing")
    expect(page.locator("#wf-userIntentPatterns-error")).to_contain_text("missing")
    expect(page.locator("#wf-permittedTools-error")).to_contain_text("agent_no_such_tool")
    expect(page.get_by_label("Instruction text")).to_have_attribute("aria-invalid", "true")
    page.get_by_label("User intent patterns").fill("check my refund\nwhere is my refund")
    page.get_by_label("Instruction text").fill("Ask for the order number, then report.")
    page.get_by_label("Permitted tools").fill("agent_calculator")
    page.get_by_label("Completion criteria").fill("The refund status was reported.")
    page.get_by_role("button", name="Validate").click()
    expect(page.locator(".status-area")).to_contain_text("refund_check' 0.1.0 is valid")
    expect(page.get_by_label("Instruction text")).not_to_have_attribute("aria-invalid", "true")
    page.get_by_role("button", name="Publish…").click()
    dialog = page.get_by_role("dialog", name="Publish refund_check?")
    expect(dialog.locator(".version-change")).to_have_text("First version: 0.1.0")
    dialog.get_by_role("button", name="Publish").click()
    expect(dialog).to_have_count(0)
    expect(page.locator(".status-area")).to_contain_text("0.1.0 is published")
    history = page.get_by_role("table", name="Revisions, oldest first")
    expect(history.get_by_role("row").last).to_contain_text("publish")
    # A change is a new draft: the dialog shows the version moving from the served one.
    page.get_by_label("Title").fill("Refund status check")
    page.get_by_role("button", name="Publish…").click()
    dialog = page.get_by_role("dialog", name="Publish refund_check?")
    expect(dialog.locator(".version-change")).to_have_text("Version 0.1.0 → 0.1.1")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    listed = httpx.get(f"{url}/v1/workflows/refund_check", headers=A).json()["workflow"]
    assert (listed["version"], listed["title"]) == ("0.1.0", "Refund check")


def test_a_second_orgs_key_sees_none_of_the_first_orgs_sessions(
    url: str, open_page: PageFactory
) -> None:
    secret = httpx.post(f"{url}/v1/sessions", json={"title": "Acme secret plan"}, headers=A)
    sid = secret.json()["sessionId"]
    mine = open_page(key="key-a")
    mine.goto(f"{url}/console/#/sessions")
    expect(mine.get_by_role("table")).to_contain_text("Acme secret plan")
    theirs = open_page(key="key-b")
    theirs.goto(f"{url}/console/#/sessions")
    expect(theirs.get_by_role("heading", name="Sessions")).to_be_visible()
    expect(theirs.locator("main")).not_to_contain_text("Acme secret plan")
    expect(theirs.locator("main")).not_to_contain_text(sid[:8])
    theirs.goto(f"{url}/console/#/sessions/{sid}")
    expect(theirs.get_by_role("alert")).to_contain_text(f"Unknown session '{sid}'")


def test_a_revoked_key_mid_use_returns_to_sign_in_and_keeps_the_typed_text(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/chat")
    expect(page.locator("#chat-mode")).to_have_text("general")
    page.evaluate("sessionStorage.setItem('aptix.apiKey', 'revoked-key')")
    page.get_by_label("Message").fill("a long message I typed")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#api-key-error")).to_contain_text("no longer accepted")
    expect(page.get_by_label("Message")).to_be_hidden()
    page.get_by_label("API key").fill("key-a")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_label("Message")).to_have_value("a long message I typed")


def _sign_in(page: Page, key: str) -> None:
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def test_after_sign_out_the_next_key_sees_nothing_the_previous_one_fetched(
    url: str, open_page: PageFactory
) -> None:
    page = open_page()
    page.goto(f"{url}/console/#/chat")
    _sign_in(page, "key-a")  # acme
    page.get_by_label("Message").fill("ACME-PRIVATE-NOTE")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".msg.assistant").last).to_contain_text("Echo: ACME-PRIVATE-NOTE")
    assert re.search(r"#/chat/[0-9a-f]{32}$", page.url)
    page.get_by_role("button", name="Sign out").click()
    _sign_in(page, "key-b")  # globex
    expect(page.locator("#chat-session")).to_have_text("new")
    expect(page.locator("#main")).not_to_contain_text("ACME-PRIVATE-NOTE")
    assert page.url.endswith("#/chat")  # the address no longer names acme's session
    # The same on a page other than the chat: globex's admin sees globex's usage.
    spent = httpx.post(f"{url}/v1/agent/execute", json={"instruction": "hello"}, headers=B)
    assert spent.status_code == 200, spent.text
    page.goto(f"{url}/console/#/usage")
    rows = page.get_by_role("table", name="Model tokens per API key").locator("tbody tr")
    expect(rows.first).to_contain_text("bob")
    page.get_by_role("button", name="Sign out").click()
    _sign_in(page, "key-a")
    expect(rows.first).to_contain_text("ann")
    expect(page.locator("#main")).not_to_contain_text("bob")


PAGES = ("chat", "sessions", "modes", "workflows", "authoring")

UNNAMED_CONTROLS = """() => [
  ...document.querySelectorAll('a[href], button, input, select, textarea')]
  .filter((el) => el.getClientRects().length > 0)
  .filter((el) => !((el.getAttribute('aria-label') || '').trim()
    || (el.labels && [...el.labels].some((l) => l.textContent.trim()))
    || el.textContent.trim()))
  .map((el) => el.tagName + '#' + el.id)"""


@pytest.mark.parametrize("viewport", [VIEWPORT, PHONE], ids=["1280x800", "phone"])
def test_every_page_names_its_controls_and_fits_the_width(
    url: str, open_page: PageFactory, viewport: dict[str, int]
) -> None:
    httpx.post(f"{url}/v1/sessions", json={"title": "A listed session"}, headers=A)
    page = open_page(key="key-a", viewport=viewport)
    for name in PAGES:
        page.goto(f"{url}/console/#/{name}")
        expect(page.get_by_role("heading", level=1)).to_be_visible()
        expect(page.locator("main table, main textarea, main article").first).to_be_visible()
        assert page.evaluate(UNNAMED_CONTROLS) == [], name
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{name} is {overflow}px wider than the {viewport} window"


def test_the_keyboard_reaches_navigation_then_sends_a_message(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/chat")
    expect(page.locator("#chat-mode")).to_have_text("general")
    order = []
    for _ in range(8):
        page.keyboard.press("Tab")
        order.append(page.evaluate("document.activeElement.textContent.trim()"))
    assert order == [
        "Skip to content",
        "Chat",
        "Sessions",
        "Modes",
        "Workflows",
        "Authoring",
        "Usage",
        "Sign out",
    ]
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="New session")).to_be_focused()
    page.get_by_label("Message").focus()
    page.keyboard.type("typed with keys")
    page.keyboard.press("Enter")
    expect(page.locator(".msg.assistant p").last).to_have_text("Echo: typed with keys")


def _publish(url: str, workflow_id: str) -> None:
    def author(arguments: dict[str, object]) -> dict[str, object]:
        body = {"arguments": arguments}
        answer = httpx.post(f"{url}/v1/tools/agent_workflow_authoring/invoke", json=body, headers=A)
        result: dict[str, object] = answer.json()["result"]
        assert result["ok"], result
        return result

    author(
        {
            "operation": "draft_workflow",
            "workflowId": workflow_id,
            "title": f"Old process {workflow_id}",
            "description": "A process on its way out.",
        }
    )
    fields = {
        "userIntentPatterns": ["run the old process"],
        "instructionText": "Do the old thing.",
        "permittedTools": ["agent_calculator"],
        "completionCriteria": ["It was done."],
    }
    author({"operation": "update_workflow", "workflowId": workflow_id, "fields": fields})
    author({"operation": "publish_workflow", "workflowId": workflow_id})


@pytest.mark.parametrize("status", ["deprecated", "disabled"])
def test_a_status_change_marks_the_workflow_in_the_list(
    url: str, open_page: PageFactory, status: str
) -> None:
    workflow_id = f"old_process_{status}"
    _publish(url, workflow_id)
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/authoring/{workflow_id}")
    page.get_by_label("Status", exact=True).select_option(status)
    page.get_by_role("button", name="Change status").click()
    expect(page.get_by_role("status").filter(has_text=f"is now {status}")).to_be_visible()
    page.get_by_role("link", name="Workflows", exact=True).click()
    row = page.get_by_role("table", name="Workflows this key can run").get_by_role("row")
    expect(row.filter(has_text=workflow_id).locator(".status")).to_have_text(status)


def test_the_session_list_is_paged(url: str, open_page: PageFactory) -> None:
    # Only this test makes sessions with key-c, so its list holds exactly these 21.
    for n in range(21):
        httpx.post(f"{url}/v1/sessions", json={"title": f"Page item {n:02}"}, headers=C)
    page = open_page(key="key-c")
    page.goto(f"{url}/console/#/sessions")
    rows = page.get_by_role("table").get_by_role("row")
    expect(rows).to_have_count(21)  # the heading row and 20 sessions
    expect(rows.nth(1)).to_contain_text("Page item 20")
    expect(page.get_by_role("button", name="Previous page")).to_be_disabled()
    page.get_by_role("button", name="Next page").click()
    expect(rows).to_have_count(2)
    expect(rows.nth(1)).to_contain_text("Page item 00")
    expect(page.get_by_role("button", name="Next page")).to_be_disabled()
    page.get_by_role("button", name="Previous page").click()
    expect(rows).to_have_count(21)


def test_a_session_waiting_for_approval_can_be_answered_from_its_page(
    url: str, open_page: PageFactory
) -> None:
    handed = httpx.post(
        f"{url}/v1/agent/execute", json={"instruction": "approve please"}, headers=A, timeout=60
    ).json()
    assert handed["kind"] == "tool-only"
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/sessions/{handed['sessionId']}")
    page.get_by_role("link", name="Open in chat").click()
    card = page.get_by_role("region", name="Approval needed")
    expect(card).to_contain_text("Delete the report?")
    card.get_by_role("button", name="Approve").click()
    expect(page.locator(".msg.assistant p").last).to_have_text("Approved: the report is deleted.")


def test_a_save_over_someone_elses_change_is_refused_and_shown(
    url: str, open_page: PageFactory
) -> None:
    """Issue 25: the editor sends the revision it shows; a change made meanwhile is kept."""
    workflow_id = "edited_twice"
    _publish(url, workflow_id)
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/authoring/{workflow_id}")
    expect(page.get_by_label("Title")).to_have_value(f"Old process {workflow_id}")
    # Someone else changes the workflow while the page is open.
    body = {
        "arguments": {
            "operation": "update_workflow",
            "workflowId": workflow_id,
            "fields": {"notes": ["changed elsewhere"]},
        }
    }
    other = httpx.post(f"{url}/v1/tools/agent_workflow_authoring/invoke", json=body, headers=A)
    assert other.json()["result"]["ok"], other.text
    page.get_by_label("Title").fill("My title")
    page.get_by_role("button", name="Save draft").click()
    expect(page.get_by_text("nothing was changed")).to_be_visible()
    got = httpx.post(
        f"{url}/v1/tools/agent_workflow_authoring/invoke",
        json={"arguments": {"operation": "get_workflow", "workflowId": workflow_id}},
        headers=A,
    ).json()["result"]["workflow"]
    assert got["notes"] == ["changed elsewhere"]
    assert got["title"] == f"Old process {workflow_id}"


def test_the_usage_page_shows_an_admin_the_tokens_of_each_key(
    url: str, open_page: PageFactory
) -> None:
    done = httpx.post(f"{url}/v1/agent/execute", json={"instruction": "hello"}, headers=A)
    assert done.status_code == 200, done.text
    spent = httpx.get(f"{url}/v1/usage", headers=A).json()
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/usage")
    expect(page.get_by_role("heading", name="Usage")).to_be_visible()
    rows = page.get_by_role("table", name="Model tokens per API key").locator("tbody tr")
    expect(rows.first).to_contain_text("ann")
    expect(rows.first).to_contain_text(f"{spent['keys'][0]['totalTokens']:,}")
    expect(page.locator("ul.limits")).to_contain_text("Token budget: no budget")
    # A key without the admin role is told so, not shown a blank page.
    other = open_page(key="key-c")
    other.goto(f"{url}/console/#/usage")
    expect(other.get_by_role("alert")).to_contain_text("admins only")
