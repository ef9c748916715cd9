"""Limits on one model response: tool calls, repeated call ids and text size (issue 15)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from aptix.llm.types import LlmResponse, ToolCallRequest

__all__ = ["ResponseCaps"]

#: Most characters of each model-written call id a warning quotes: five of them and the rest
#: of the warning stay within the 500 characters a span event or a log line keeps.
_ID_SHOWN = 64


@dataclass(frozen=True, slots=True)
class ResponseCaps:
    """What one model response may carry; the excess is cut, each cut named in a warning."""

    max_tool_calls: int = 32
    max_text_chars: int = 100_000

    def apply(self, response: LlmResponse) -> tuple[LlmResponse, list[str]]:
        """``response`` within the caps, and a warning for each thing that was cut."""
        warnings: list[str] = []
        calls = _unique(response.tool_calls, warnings)
        if len(calls) > self.max_tool_calls:
            warnings.append(
                f"The model asked for {len(calls)} tool calls in one response; only the first "
                f"{self.max_tool_calls} were run (APTIX_MAX_TOOL_CALLS_PER_RESPONSE)."
            )
            calls = calls[: self.max_tool_calls]
        text = self._cut(response.text, "text", warnings)
        # A refusal is said in place of text: kept, answered and replayed to the model alike.
        refusal = self._cut(response.refusal, "refusal", warnings)
        if not warnings:
            return response, warnings
        return replace(response, text=text, refusal=refusal, tool_calls=tuple(calls)), warnings

    def _cut(self, said: str | None, what: str, warnings: list[str]) -> str | None:
        if said is None or len(said) <= self.max_text_chars:
            return said
        warnings.append(
            f"The model's {what} was {len(said)} characters; only the first "
            f"{self.max_text_chars} were kept (APTIX_MAX_MODEL_TEXT_CHARS)."
        )
        return said[: self.max_text_chars]


def _unique(calls: tuple[ToolCallRequest, ...], warnings: list[str]) -> list[ToolCallRequest]:
    # Results are matched to calls by id: a repeated id in one response would be ambiguous.
    seen: set[str] = set()
    kept: list[ToolCallRequest] = []
    repeated: list[str] = []
    for call in calls:
        if call.id in seen:
            repeated.append(call.id)
            continue
        seen.add(call.id)
        kept.append(call)
    if repeated:
        shown = ", ".join(_quoted(i) for i in sorted(set(repeated))[:5])
        warnings.append(
            f"The model used the tool call id(s) {shown} more than once in one response; "
            f"{len(repeated)} repeated call(s) were refused and not run."
        )
    return kept


def _quoted(call_id: str) -> str:
    """A call id the model wrote, quoted with its control characters escaped, and cut."""
    # Cut before repr: the id can be of any size, and repr grows it by escaping.
    shown = repr(call_id[:_ID_SHOWN])
    if len(call_id) <= _ID_SHOWN and len(shown) <= _ID_SHOWN + 2:
        return shown
    return f"{shown[: _ID_SHOWN + 1]}…"
