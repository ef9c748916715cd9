"""The console for screen-reader and narrow-screen users, in a real Chromium (review r5, round 67).

A streamed answer was told to assistive technology once a frame, each time whole so far ("The
quarterly", "The quarterly report", ...): the message being streamed is now ``aria-busy``, and
the finished text is added once. A long word in an approval card or a chat note ran past the
card and the transcript (the end of what was approved was hidden): it wraps. Two approval
cards were two regions "Approval needed" with buttons "Approve" and "Deny" each: each card and
button is named by what it asks. The sign-in screen had no ``main`` landmark, and every page
load logged a 404 for ``/favicon.ico``: the console points at the icon the package ships.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from aptix.settings import AptixSettings
from aptix.testing import call, reply
from aptix.testing.server import Fail, ScriptedOpenAIServer, Step
from tests.console.browser import PHONE, in_process
from tests.console.conftest import PageFactory

ANSWER = (
    "The quarterly report is ready. Revenue grew by twelve percent and costs stayed flat "
    "across both regions this year."
)
#: An action whose end (what matters) follows a word too long for any screen.
ACTION = "delete /srv/exports/" + "a" * 120 + "/../../../etc/production-database"
LONG_PROMPT = "Remove " + "p" * 200 + "?"
LONG_DETAILS = "d" * 300
LONG_ERROR = "upstream said: https://models.example.test/v1/errors/" + "e" * 260 + "/trace"


def _respond(body: dict[str, Any]) -> Step:
    last = body["messages"][-1]
    if last["role"] == "tool":
        return reply("Done.")
    text = str(last.get("content") or "")
    if text == "report please":
        return reply(ANSWER)
    if text == "two approvals":
        first = {"prompt": "Archive the report?", "action": "archive report"}
        second = {"prompt": "Email the team?", "action": "email team", "destructive": True}
        return reply(
            None,
            call("request_user_approval", first, id="two-1"),
            call("request_user_approval", second, id="two-2"),
        )
    if text == "long approve":
        request = {
            "prompt": LONG_PROMPT,
            "action": ACTION,
            "details": LONG_DETAILS,
            "destructive": True,
        }
        return reply(None, call("request_user_approval", request, id="long-1"))
    if text == "ask plainly":
        return reply(None, call("request_user_approval", {"prompt": "Go ahead?"}, id="plain-1"))
    if text == "long fail":
        return Fail(500, LONG_ERROR)
    return reply(f"Echo: {text}")


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ScriptedOpenAIServer(respond=_respond) as llm:
        settings = AptixSettings(
            data_dir=Path(tmp_path_factory.mktemp("console-a11y-67")),
            load_plugins=False,
            semantic_matching=False,
            api_keys="key-a=acme:ann:admin",
            llm_model="scripted",
            llm_base_url=llm.base_url,
            llm_max_retries=0,
        )
        with in_process(settings) as served:
            yield served


def _send(page: Page, url: str, text: str) -> None:
    page.goto(f"{url}/console/#/chat")
    expect(page.locator("#chat-mode")).to_have_text("general")
    page.get_by_label("Message").fill(text)
    page.get_by_label("Message").press("Enter")


# F1: a streamed answer is told once

#: The turn's event stream handed to the page one event every 40 ms, as a model that writes
#: word by word sends it (the scripted model sends all its words at once): each word's
#: text_delta arrives in a frame of its own.
PACED = """(() => {
  const realFetch = window.fetch;
  window.fetch = async (input, init) => {
    const response = await realFetch(input, init);
    const address = typeof input === "string" ? input : input.url;
    if (!address.includes("/v1/agent/execute") || !response.ok || !response.body) return response;
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    const encoder = new TextEncoder();
    let buffer = "";
    const body = new ReadableStream({
      async pull(controller) {
        while (!buffer.includes("\\n\\n")) {
          const { value, done } = await reader.read();
          if (done) {
            if (buffer) controller.enqueue(encoder.encode(buffer));
            buffer = "";
            controller.close();
            return;
          }
          buffer += value.replace(/\\r\\n?/g, "\\n");
        }
        const end = buffer.indexOf("\\n\\n") + 2;
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end);
        await new Promise((resolve) => setTimeout(resolve, 40));
        controller.enqueue(encoder.encode(event));
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
})();"""

#: What the transcript (role=log: polite, "additions text") is told, batch by batch as the
#: page hands it over: each node added (or text changed) that is still there, once with what
#: it then holds (not again for a node inside another one added), and whether a node marked
#: aria-busy holds it: assistive technology waits for such a node to finish (WAI-ARIA).
OBSERVE = """() => {
  window.__changes = [];
  const log = document.querySelector('[role="log"]');
  new MutationObserver((records) => {
    const added = new Set();
    for (const record of records) {
      if (record.type === "characterData") added.add(record.target);
      else for (const node of record.addedNodes) added.add(node);
    }
    for (const node of added) {
      if (!node.isConnected) continue;
      let inside = false;
      for (let up = node.parentNode; up && !inside; up = up.parentNode) inside = added.has(up);
      if (inside) continue;
      const el = node.nodeType === Node.ELEMENT_NODE ? node : node.parentElement;
      const busy = el.closest('[aria-busy="true"]') !== null;
      window.__changes.push({ busy, text: node.textContent || "" });
    }
  }).observe(log, { childList: true, subtree: true, characterData: true });
}"""


def _told(page: Page) -> tuple[list[str], list[str]]:
    """What of the answer the transcript told, and what it held back as busy."""
    changes: list[dict[str, Any]] = page.evaluate("window.__changes")
    told = [c["text"] for c in changes if not c["busy"] and "quarterly" in c["text"]]
    waited = [c["text"] for c in changes if c["busy"] and "quarterly" in c["text"]]
    return told, waited


def test_a_streamed_answer_is_told_once_when_it_is_complete(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    page.add_init_script(PACED)
    page.goto(f"{url}/console/#/chat")
    expect(page.locator("#chat-mode")).to_have_text("general")
    page.evaluate(OBSERVE)
    page.get_by_label("Message").fill("report please")
    page.get_by_label("Message").press("Enter")
    streaming = page.locator(".msg.assistant")
    # While it streams, the message says it is being updated.
    expect(streaming).to_have_attribute("aria-busy", "true")
    expect(streaming.locator(".md")).to_have_text(ANSWER)
    expect(page.get_by_role("button", name="Cancel turn")).to_be_disabled()
    expect(streaming).not_to_have_attribute("aria-busy", "true")
    told, waited = _told(page)
    # It did stream: the text grew on screen in several frames...
    assert len(waited) > 3, waited
    # ...and what the live region tells is the whole answer, once.
    assert len(told) == 1, told
    assert ANSWER in told[0], told


def test_an_answer_that_did_not_stream_is_told_once(url: str, open_page: PageFactory) -> None:
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/chat")
    expect(page.locator("#chat-mode")).to_have_text("general")
    page.evaluate(OBSERVE)
    page.get_by_label("Message").fill("report please")
    page.get_by_label("Message").press("Enter")
    expect(page.locator(".msg.assistant .md")).to_have_text(ANSWER)
    expect(page.get_by_role("button", name="Cancel turn")).to_be_disabled()
    told, _ = _told(page)
    assert len(told) == 1, told
    assert ANSWER in told[0], told
    expect(page.locator(".transcript [aria-busy]")).to_have_count(0)


# F2: long words in approval cards and notes wrap

#: Each element matched: how far its content reaches right, against its own box, the card's
#: and the transcript's right edges.
REACH = """(selector) => [...document.querySelectorAll(selector)].map((el) => {
  const log = document.querySelector(".transcript");
  const box = el.getBoundingClientRect();
  const card = (el.closest(".card") || el).getBoundingClientRect();
  return {
    selector, text: el.textContent.slice(-40),
    contentRight: Math.round(box.left + el.scrollWidth), right: Math.round(box.right),
    cardRight: Math.round(card.right), logRight: Math.round(log.getBoundingClientRect().right),
    logScrolls: log.scrollWidth > log.clientWidth,
  };
})"""


LAST_LETTER_INSIDE = """(dd) => {
  const text = dd.firstChild;
  const range = document.createRange();
  range.setStart(text, text.length - 1);
  range.setEnd(text, text.length);
  const letter = range.getBoundingClientRect();
  const card = dd.closest(".card").getBoundingClientRect();
  return letter.width > 0 && letter.left >= card.left && letter.right <= card.right;
}"""


def _fits(page: Page, selector: str) -> None:
    found: list[dict[str, Any]] = page.evaluate(REACH, selector)
    assert found, selector
    for el in found:
        assert el["contentRight"] <= el["right"] + 1, el
        assert el["right"] <= el["cardRight"] + 1, el
        assert el["right"] <= el["logRight"] + 1, el
        assert not el["logScrolls"], el


@pytest.mark.parametrize("viewport", [{"width": 320, "height": 800}, PHONE, None])
def test_a_long_action_in_an_approval_card_wraps_inside_the_card(
    url: str, open_page: PageFactory, viewport: dict[str, int] | None
) -> None:
    page = open_page(key="key-a", viewport=viewport)
    _send(page, url, "long approve")
    card = page.get_by_role("region", name="Approval needed")
    expect(card.get_by_role("button", name="Approve")).to_be_visible()
    expect(card.locator("dd").first).to_have_text(ACTION)
    for selector in (".card .prompt", ".card dd", ".card h2"):
        _fits(page, selector)
    # The last letter of the action, what is approved, is drawn inside the card.
    assert card.locator("dd").first.evaluate(LAST_LETTER_INSIDE)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


@pytest.mark.parametrize("viewport", [{"width": 320, "height": 800}, None])
def test_a_long_error_in_a_chat_note_wraps(
    url: str, open_page: PageFactory, viewport: dict[str, int] | None
) -> None:
    page = open_page(key="key-a", viewport=viewport)
    _send(page, url, "long fail")
    note = page.locator(".note.error")
    expect(note).to_contain_text("e" * 200)
    _fits(page, ".note.error")


# F3: each approval card and its buttons are named by what they ask


def test_two_approval_cards_and_their_buttons_have_names_of_their_own(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    _send(page, url, "two approvals")
    cards = page.get_by_role("region", name="Approval needed")
    expect(cards).to_have_count(2)
    first, second = cards.nth(0), cards.nth(1)
    expect(first).to_have_accessible_name("Approval needed Archive the report?")
    expect(second).to_have_accessible_name("Approval needed Email the team?")
    expect(first.get_by_role("button", name="Approve")).to_have_accessible_name(
        "Approve archive report"
    )
    expect(first.get_by_role("button", name="Deny")).to_have_accessible_name("Deny archive report")
    expect(first.get_by_role("button", name="Approve")).to_have_accessible_description(
        "Archive the report?"
    )
    expect(second.get_by_role("button", name="Approve")).to_have_accessible_name(
        "Approve email team"
    )
    # The destructive one says so on its buttons.
    expect(second.get_by_role("button", name="Deny")).to_have_accessible_description(
        "Email the team? Destructive Yes — this cannot be undone"
    )
    # A screen reader's list of buttons: four different names.
    names = [
        b.evaluate("b => b.textContent") for b in page.locator(".card button").all()
    ]  # what is shown stays the one word
    assert names == ["Approve", "Deny", "Approve", "Deny"]
    snapshot = page.locator(".transcript").aria_snapshot()
    assert 'button "Approve archive report"' in snapshot
    assert 'button "Deny email team"' in snapshot
    # Still answered as before: the next card, then the turn goes on.
    first.get_by_role("button", name="Approve").click()
    expect(second.get_by_role("button", name="Approve")).to_be_focused()
    second.get_by_role("button", name="Deny").click()
    expect(page.locator(".msg.assistant").last).to_contain_text("Done.")


def test_an_approval_without_an_action_is_named_by_its_prompt(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    _send(page, url, "ask plainly")
    card = page.get_by_role("region", name="Approval needed")
    expect(card).to_have_accessible_name("Approval needed Go ahead?")
    expect(card.get_by_role("button", name="Approve")).to_have_accessible_name("Approve Go ahead?")
    expect(card.get_by_role("button", name="Deny")).to_have_accessible_name("Deny Go ahead?")


def test_the_sign_in_screen_is_the_page_s_main_landmark(url: str, open_page: PageFactory) -> None:
    page = open_page()
    page.goto(f"{url}/console/")
    main = page.get_by_role("main")
    expect(main).to_have_count(1)
    expect(main).to_be_visible()
    expect(main.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(main.get_by_label("API key")).to_be_focused()
    main.get_by_label("API key").fill("key-a")
    main.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Chat")).to_be_visible()
    # Signed in: one main landmark still, the console's.
    expect(page.get_by_role("main")).to_have_count(1)
    expect(page.get_by_role("main")).to_have_id("main")
    expect(page.locator("main")).to_be_focused()


# F4: the console's icon


def test_the_console_loads_its_icon_and_logs_no_error(url: str, open_page: PageFactory) -> None:
    page = open_page(key="key-a")
    failed: list[str] = []
    logged: list[str] = []
    page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
    page.on("console", lambda m: logged.append(m.text) if m.type == "error" else None)
    page.goto(f"{url}/console/#/chat")
    expect(page.locator("#chat-mode")).to_have_text("general")
    icon = page.locator('link[rel="icon"]')
    expect(icon).to_have_count(1)
    href = icon.evaluate("link => link.href")
    assert href == f"{url}/docs-assets/favicon.png"
    got = page.request.get(href)
    assert got.status == 200
    assert got.headers["content-type"] == "image/png"
    page.wait_for_load_state("networkidle")
    assert not failed, failed
    assert not logged, logged
