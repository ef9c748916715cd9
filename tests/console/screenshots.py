"""Screenshots of every console page at 1280×800, and of chat and a session at 390 px wide,
for docs/console.md.

    python -m tests.console.screenshots [OUT_DIR]   # default: docs/console

Starts ``aptix serve`` with an API key and the scripted model of the browser tests, fills it
with a few sessions and a workflow draft, and drives the system Chromium through the pages.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect, sync_playwright

from aptix.testing.server import ScriptedOpenAIServer
from tests.console.browser import PHONE, VIEWPORT, aptix_serve
from tests.console.model import respond

ROOT = Path(__file__).resolve().parents[2]
KEY = "demo-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


def _fill(url: str) -> str:
    """Sessions with a mode change and a branch; returns the branched session's parent."""
    for title in ("Quarterly numbers", "Refund questions"):
        httpx.post(f"{url}/v1/sessions", json={"title": title}, headers=AUTH)
    branched = httpx.post(
        f"{url}/v1/agent/execute", json={"instruction": "branch off"}, headers=AUTH, timeout=60
    ).json()
    httpx.post(
        f"{url}/v1/agent/execute",
        json={"sessionId": branched["sessionId"], "instruction": "call a missing tool"},
        headers=AUTH,
        timeout=60,
    )
    return str(branched["sessionId"])


def _shoot(page: Page, out: Path, name: str) -> None:
    path = out / f"{name}.png"
    page.screenshot(path=path)
    print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


def main(out: Path) -> None:
    """Write the screenshots into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=60_000)
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("Install the 'chromium' package first (apt-get install chromium).")
    with (
        tempfile.TemporaryDirectory() as data,
        ScriptedOpenAIServer(respond=respond) as llm,
        aptix_serve(
            Path(data),
            APTIX_API_KEYS=f"{KEY}=acme:ann:admin",
            APTIX_LLM_MODEL="scripted",
            APTIX_LLM_BASE_URL=llm.base_url,
        ) as url,
        sync_playwright() as playwright,
    ):
        parent = _fill(url)
        browser = playwright.chromium.launch(executable_path=chromium)
        page = browser.new_page(viewport=VIEWPORT)
        page.goto(f"{url}/console/")
        page.get_by_label("API key").fill("not-the-key")
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#api-key-error")).not_to_be_empty()
        _shoot(page, out, "sign-in")
        page.get_by_label("API key").fill(KEY)
        page.get_by_role("button", name="Sign in").click()

        page.get_by_label("Message").fill("approve please")
        page.get_by_role("button", name="Send").click()
        card = page.get_by_role("region", name="Approval needed")
        expect(card).to_be_visible()
        _shoot(page, out, "chat-approval")
        card.get_by_role("button", name="Approve").click()
        expect(page.get_by_role("button", name="Send")).to_be_enabled()
        page.get_by_label("Message").fill("switch to calculation")
        page.get_by_role("button", name="Send").click()
        expect(page.locator(".note.welcome")).to_be_visible()
        expect(page.get_by_role("button", name="Send")).to_be_enabled()
        _shoot(page, out, "chat")
        page.get_by_label("Message").fill("slow")
        page.get_by_role("button", name="Send").click()
        expect(page.locator(".thinking")).to_be_visible()
        _shoot(page, out, "chat-thinking")
        page.get_by_role("button", name="Cancel turn").click()
        expect(page.get_by_role("button", name="Send")).to_be_enabled()
        page.get_by_role("button", name="New session").click()
        page.get_by_label("Message").fill("summarise the quarter")
        page.get_by_role("button", name="Send").click()
        expect(page.locator(".msg.assistant .md pre")).to_be_visible()
        expect(page.get_by_role("button", name="Send")).to_be_enabled()
        _shoot(page, out, "chat-markdown")
        page.set_viewport_size(PHONE)
        page.locator(".msg.assistant .md").last.scroll_into_view_if_needed()
        _shoot(page, out, "chat-markdown-390")
        href = page.locator("#chat-session a").get_attribute("href") or ""
        page.goto(f"{url}/console/{href}")
        expect(page.locator(".answer-text .md pre")).to_be_visible()
        page.get_by_role("article", name="Turn 1").scroll_into_view_if_needed()
        page.evaluate("window.scrollBy(0, -8)")
        _shoot(page, out, "session-390")
        page.set_viewport_size(VIEWPORT)

        page.goto(f"{url}/console/#/sessions")
        expect(page.get_by_role("table")).to_be_visible()
        _shoot(page, out, "sessions")
        page.goto(f"{url}/console/#/sessions/{parent}")
        expect(page.get_by_role("heading", name="Mode history")).to_be_visible()
        _shoot(page, out, "session")

        page.goto(f"{url}/console/#/modes")
        expect(page.get_by_role("article").first).to_be_visible()
        _shoot(page, out, "modes")

        page.goto(f"{url}/console/#/workflows")
        page.get_by_label("Request").fill("help me calculate a sum")
        page.get_by_role("button", name="Match").click()
        expect(page.get_by_role("table", name="Candidates, best first")).to_be_visible()
        page.get_by_role("heading", name="Match playground").scroll_into_view_if_needed()
        _shoot(page, out, "workflows")

        page.goto(f"{url}/console/#/authoring")
        page.get_by_label("Workflow ID").fill("refund_check")
        page.get_by_label("Title").fill("Refund check")
        page.get_by_label("Description").fill("Checks the status of a customer's refund.")
        page.get_by_role("button", name="Create draft").click()
        page.get_by_label("Permitted tools").fill("agent_refund_lookup")
        page.get_by_role("button", name="Validate").click()
        expect(page.locator("#wf-instructionText-error")).not_to_be_empty()
        page.locator("#wf-userIntentPatterns").scroll_into_view_if_needed()
        _shoot(page, out, "authoring")
        page.get_by_label("User intent patterns").fill("check my refund\nwhere is my refund")
        page.get_by_label("Instruction text").fill("Ask for the order number, then report.")
        page.get_by_label("Permitted tools").fill("agent_calculator")
        page.get_by_label("Completion criteria").fill("The refund status was reported.")
        page.get_by_role("button", name="Publish…").click()
        expect(page.get_by_role("dialog")).to_be_visible()
        _shoot(page, out, "publish")
        browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "console")
