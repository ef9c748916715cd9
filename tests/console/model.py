"""The scripted model the console tests talk to: its answer depends on the message alone.

Every test sends its own instruction, so the answers never depend on test order.
"""

from __future__ import annotations

import json
from typing import Any

from aptix.testing import call, reply
from aptix.testing.server import Delay, Step

HOSTILE = (
    "<script>window.__pwned = 1</script> [click me](javascript:alert(1)) **bold** "
    '<img src=x onerror="window.__pwned = 2">'
)
#: 300 characters, one token: shown whole and wrapped, never cut or wider than the page.
LONG_URL = "https://example.test/" + "a1b2c3d4e5" * 27 + "end"
#: Markdown written to escape the console: every line of it must stay inert.
HOSTILE_MARKDOWN = "\n".join(
    [
        "# Report",
        "first line",
        "second line",
        "",
        "[js link](javascript:window.__pwned=3) [JS](JaVaScRiPt:window.__pwned=4) "
        "[entity](&#106;avascript:window.__pwned=5) [data](data:text/html;base64,PHNjcmlwdD4=) "
        "<javascript:window.__pwned=6> [ok link](https://example.test/ok)",
        "![tracker](https://example.test/pixel.png) ![js](javascript:window.__pwned=7) "
        "![data](data:image/png;base64,iVBORw0KGgo=)",
        '<img src=x onerror="window.__pwned=8"> <iframe src="javascript:1"></iframe> '
        '<svg onload="window.__pwned=9"></svg> <a href="javascript:1">raw</a>',
        "",
        '<div onclick="window.__pwned=10">html block</div>',
        "",
        "```html",
        "<script>window.__pwned = 11</script>",
        "  indented line",
        "```",
        "",
        f"A long token: {LONG_URL}",
        "",
        "`" + "x" * 400 + "`",
        "",
        "| a | b |",
        "| - | - |",
        "| " + "y" * 300 + " | **cell** |",
    ]
)
#: A Markdown answer as a model writes one (the screenshots show it rendered).
MARKDOWN_ANSWER = "\n".join(
    [
        "## Quarter summary",
        "Revenue grew by **12%**; costs stayed flat.",
        "The two regions:",
        "",
        "1. *North*: ahead of plan",
        "2. *South*: on plan",
        "",
        "```python",
        "total = sum(region.revenue for region in regions)",
        'print(f"{total:,}")',
        "```",
        "",
        f"Source: {LONG_URL}",
    ]
)
BIG_NAME = "x" * 2_000_000  # the greeting repeats it: a 2 MB tool result


def respond(body: dict[str, Any]) -> Step:
    """The answer to the conversation in ``body`` (a Chat Completions request)."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return _after_tool(last)
    text = str(last.get("content") or "")
    if text == "approve please":
        approval = {"prompt": "Delete the report?", "action": "delete report", "destructive": True}
        return reply(
            "I need your approval first.", call("request_user_approval", approval, id="approve-1")
        )
    if text == "switch to calculation":
        change = {"mode": "calculation", "branch": False, "reason": "numbers"}
        return reply(None, call("agent_change_mode", change, id="mode-1"))
    if text == "branch off":
        change = {"mode": "calculation", "branch": True, "reason": "numbers in a new session"}
        return reply(None, call("agent_change_mode", change, id="mode-2"))
    if text == "call a missing tool":  # not offered in the general mode: refused
        listing = {"operation": "list_authoring_workflows"}
        return reply(None, call("agent_workflow_authoring", listing, id="refused-1"))
    if text == "start the calculation workflow":
        start = {"operation": "start_workflow", "workflowId": "guided_calculation"}
        return reply(None, call("agent_workflow_run", start, id="start-1"))
    if text == "hostile":
        return reply(HOSTILE)
    if text == "summarise the quarter":
        return reply(MARKDOWN_ANSWER)
    if text == "hostile markdown":
        return reply(HOSTILE_MARKDOWN)
    if text == "big result":
        return reply(None, call("agent_hello_world", {"name": BIG_NAME}, id="greet-1"))
    if text == "slow":
        return Delay(30, reply("Too late."))
    return reply(f"Echo: {text}")


def _after_tool(message: dict[str, Any]) -> Step:
    call_id = str(message.get("tool_call_id"))
    if call_id.startswith("approve-"):
        approved = json.loads(message["content"]).get("approved") is True
        return reply(
            "Approved: the report is deleted." if approved else "Denied: nothing was done."
        )
    if call_id.startswith("start-"):
        return reply("The guided calculation has started.")
    if call_id.startswith("mode-"):
        return reply("Now in calculation mode.")
    return reply("Done.")
