"""The built-in demo model: offline, rule-based, and saying so in every answer.

``APTIX_LLM_MODEL=demo`` (with no ``APTIX_LLM_BASE_URL``), ``aptix serve --demo`` and
``aptix chat --demo`` use it, so Aptix can be tried without an API key or a network: it
answers, streams its text, and calls the built-in tools when a message asks for what they do
(arithmetic, the modes, a mode change, the workflows, an approval). It reads keywords, not
meaning; it is a way to watch the runtime work, not a language model.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from typing import Any

from aptix.errors import LlmError
from aptix.llm.types import LlmRequest, LlmResponse, TextSink, ToolCallRequest, Usage

__all__ = ["DEMO_MODEL", "NO_FORMATS", "DemoModel", "is_demo", "use_demo_model"]

#: The value of ``APTIX_LLM_MODEL`` that selects the demo model.
DEMO_MODEL = "demo"
#: Every answer starts with this, so nobody mistakes it for a real model.
LABEL = "(demo model)"
#: Why the demo model answers no ``response_format`` other than free text.
NO_FORMATS = (
    "The built-in demo model answers in free text only: it cannot honour a response_format "
    "(json_object or json_schema); configure a model endpoint (APTIX_LLM_MODEL, "
    "APTIX_LLM_BASE_URL) for structured output."
)
#: A pause between streamed words, so streaming can be seen.
WORD_DELAY_SECONDS = 0.01

_EXPRESSION = re.compile(r"[-+(]*\d[\d\s.,+\-*/%()^e]*")
_MODE = re.compile(r"\b(?:to|into|in)\s+(?:the\s+)?([a-z][a-z0-9_]*)(?:\s+mode)?", re.I)
_CAPABILITIES = (
    "calculate 2*(3+4) · list the modes · show the workflows · ask me for approval · "
    "switch to calculation mode"
)


def is_demo(model: str | None, base_url: str | None) -> bool:
    """True when the settings ask for the built-in demo model (no endpoint named)."""
    return base_url is None and (model or "").strip().lower() == DEMO_MODEL


def use_demo_model() -> None:
    """Make this process's settings choose the demo model (``--demo`` on the command line)."""
    import os

    os.environ["APTIX_LLM_MODEL"] = DEMO_MODEL
    os.environ.pop("APTIX_LLM_BASE_URL", None)


class DemoModel:
    """A rule-based :class:`~aptix.llm.types.LlmClient` for trying Aptix offline."""

    #: What its ``chat`` spans name: the model asked for, and no remote provider.
    model = DEMO_MODEL
    provider = "aptix.demo"
    #: It answers by keywords in free text only: a ``response_format`` is refused up front.
    structured_output = False

    def __init__(self, *, word_delay_seconds: float = WORD_DELAY_SECONDS) -> None:
        self._delay = word_delay_seconds
        self._ids = itertools.count(1)

    async def complete(self, request: LlmRequest, on_text: TextSink | None = None) -> LlmResponse:
        """Answer the last message: a tool call when one fits, else text."""
        if (request.response_format or {}).get("type", "text") != "text":
            # Surfaces refuse the request first (structured_output); this is the backstop.
            raise LlmError(NO_FORMATS)
        last = request.messages[-1] if request.messages else {}
        offered = {str(t.get("name")) for t in request.tools}
        if last.get("role") == "tool":
            text = _summary(_recent_results(request.messages))
            return await self._say(text, on_text)
        instruction = str(last.get("content") or "") if last.get("role") == "user" else ""
        wanted = _tool_for(instruction)
        if wanted is None:
            return await self._say(
                f"I am Aptix's built-in demo model: I answer by keywords and call the "
                f"built-in tools. Try: {_CAPABILITIES}.",
                on_text,
            )
        name, arguments = wanted
        if name not in offered:
            return await self._say(
                f"The tool {name} is not offered in this mode; /modes lists the modes.", on_text
            )
        call = ToolCallRequest(f"demo_{next(self._ids)}", name, json.dumps(arguments))
        return LlmResponse(
            tool_calls=(call,),
            usage=_usage(request, 10),
            finish_reason="tool_calls",
            model_id=DEMO_MODEL,
        )

    async def _say(self, text: str, on_text: TextSink | None) -> LlmResponse:
        text = f"{LABEL} {text}"
        if on_text is not None:
            for piece in re.findall(r"\S+\s*", text):
                await on_text(piece)
                if self._delay:
                    await asyncio.sleep(self._delay)
        return LlmResponse(
            text=text,
            usage=Usage(0, len(text.split())),
            finish_reason="stop",
            model_id=DEMO_MODEL,
        )


def _usage(request: LlmRequest, completion: int) -> Usage:
    words = sum(len(str(m.get("content") or "").split()) for m in request.messages)
    return Usage(words, completion)


def _tool_for(instruction: str) -> tuple[str, dict[str, Any]] | None:
    """The built-in tool a message asks for, with its arguments."""
    lowered = instruction.lower()
    if "approv" in lowered:
        return "request_user_approval", {
            "prompt": "The demo model asks: may it go ahead?",
            "action": "demo_action",
        }
    if "workflow" in lowered:
        return "agent_workflow_registry", {"operation": "list_workflows"}
    if re.search(r"\b(switch|change)\b", lowered) and (found := _MODE.search(instruction)):
        mode = found.group(1).lower()
        return "agent_change_mode", {"mode": mode, "branch": False, "reason": "Asked by the user."}
    if "mode" in lowered:
        return "agent_list_modes", {}
    expression = _expression(instruction)
    if expression is not None:
        return "agent_calculator", {"expression": expression}
    return None


def _expression(instruction: str) -> str | None:
    candidates = [m.group().strip() for m in _EXPRESSION.finditer(instruction)]
    arithmetic = [c for c in candidates if re.search(r"\d\s*[-+*/%^]\s*[-+(]*\d", c)]
    if not arithmetic:
        return None
    return max(arithmetic, key=len).replace("^", "**").rstrip(".,")


def _recent_results(messages: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    """The tool results after the model's last call, each with the call's tool name."""
    results: list[dict[str, Any]] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            names = {c["id"]: c["function"]["name"] for c in message.get("tool_calls") or ()}
            return [{**r, "name": names.get(r.get("tool_call_id"), "tool")} for r in results]
        results.insert(0, message)
    return results


def _summary(results: list[dict[str, Any]]) -> str:
    return " ".join(_one_summary(r["name"], str(r.get("content") or "")) for r in results)


def _one_summary(name: str, content: str) -> str:
    try:
        value: Any = json.loads(content)
    except (ValueError, RecursionError):
        value = content
    if isinstance(value, dict) and "error" in value:
        return f"{name} failed: {value['error']}"
    if name == "agent_calculator" and isinstance(value, dict) and "result" in value:
        return f"The calculator says {value['result']}."
    if name == "request_user_approval" and isinstance(value, dict) and "approved" in value:
        return "You approved." if value["approved"] else "You declined."
    if name == "agent_list_modes" and isinstance(value, dict) and "modes" in value:
        keys = ", ".join(str(m.get("key")) for m in value["modes"] if isinstance(m, dict))
        return f"The modes are: {keys}."
    if name == "agent_change_mode" and isinstance(value, dict) and "mode" in value:
        return f"The session is now in {value['mode']} mode."
    if name == "agent_workflow_registry" and isinstance(value, dict):
        listed = value.get("workflows")
        if isinstance(listed, list):
            ids = ", ".join(str(w.get("workflowId")) for w in listed if isinstance(w, dict))
            return f"The workflows are: {ids or 'none yet'}."
    return f"{name} returned: {content}"
