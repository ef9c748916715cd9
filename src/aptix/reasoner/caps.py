"""Limits on one model response: tool calls, repeated call ids and text size (issue 15).

A call a cap refuses is not cut from the response: the model asked for it, so it stays in
the model's message and in the ledger, as not run, with the reason as its result (DESIGN
§14: the transcript holds every call with its outcome). The model then reads that it did
not run, and why, instead of its own message without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from aptix.llm.types import LlmResponse, ToolCallRequest

__all__ = ["Capped", "ResponseCaps"]

#: Most characters of each model-written call id a warning quotes: five of them and the rest
#: of the warning stay within the 500 characters a span event or a log line keeps.
_ID_SHOWN = 64

#: What the model and clients are told of a call over the cap (its ``errorMessage``).
OVER_CAP = (
    "Not run: the response asked for {asked} tool calls, more than the {cap} one response may "
    "run (APTIX_MAX_TOOL_CALLS_PER_RESPONSE). Ask for it again in a later response if it is "
    "still needed."
)
#: What the model and clients are told of a call that repeats an id of its response.
REPEATED_ID = (
    "Not run: another call of the same response used its id {id}, and call ids must be "
    "unique within a response. Ask for it again if it is still needed."
)


@dataclass(frozen=True, slots=True)
class Capped:
    """A response within the caps: its text cut, every call kept, those refused named."""

    response: LlmResponse
    #: One for each thing that was cut or refused.
    warnings: list[str] = field(default_factory=list)
    #: The index in ``response.tool_calls`` of each call that must not run, and why.
    refused: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ResponseCaps:
    """What one model response may carry; the excess is cut or refused, named in a warning."""

    max_tool_calls: int = 32
    max_text_chars: int = 100_000

    def apply(self, response: LlmResponse) -> Capped:
        """``response`` within the caps, a warning for each cut, and the calls refused."""
        warnings: list[str] = []
        refused = _repeated(response.tool_calls, warnings)
        unique = [i for i in range(len(response.tool_calls)) if i not in refused]
        if len(unique) > self.max_tool_calls:
            warnings.append(
                f"The model asked for {len(unique)} tool calls in one response; only the first "
                f"{self.max_tool_calls} were run (APTIX_MAX_TOOL_CALLS_PER_RESPONSE)."
            )
            over = OVER_CAP.format(asked=len(unique), cap=self.max_tool_calls)
            refused.update(dict.fromkeys(unique[self.max_tool_calls :], over))
        text = self._cut(response.text, "text", warnings)
        # A refusal is said in place of text: kept, answered and replayed to the model alike.
        said = self._cut(response.refusal, "refusal", warnings)
        if text != response.text or said != response.refusal:
            response = replace(response, text=text, refusal=said)
        return Capped(response, warnings, dict(sorted(refused.items())))

    def _cut(self, said: str | None, what: str, warnings: list[str]) -> str | None:
        if said is None or len(said) <= self.max_text_chars:
            return said
        warnings.append(
            f"The model's {what} was {len(said)} characters; only the first "
            f"{self.max_text_chars} were kept (APTIX_MAX_MODEL_TEXT_CHARS)."
        )
        return said[: self.max_text_chars]


def _repeated(calls: tuple[ToolCallRequest, ...], warnings: list[str]) -> dict[int, str]:
    """The calls reusing the id of an earlier call of the response (by index), and why."""
    # Results are matched to calls by id: a repeated id in one response would be ambiguous.
    seen: set[str] = set()
    refused: dict[int, str] = {}
    for index, call in enumerate(calls):
        if call.id in seen:
            refused[index] = REPEATED_ID.format(id=_quoted(call.id))
            continue
        seen.add(call.id)
    if refused:
        repeated = {calls[i].id for i in refused}
        shown = ", ".join(_quoted(i) for i in sorted(repeated)[:5])
        warnings.append(
            f"The model used the tool call id(s) {shown} more than once in one response; "
            f"{len(refused)} repeated call(s) were refused and not run."
        )
    return refused


def _quoted(call_id: str) -> str:
    """A call id the model wrote, quoted with its control characters escaped, and cut."""
    # Cut before repr: the id can be of any size, and repr grows it by escaping.
    shown = repr(call_id[:_ID_SHOWN])
    if len(call_id) <= _ID_SHOWN and len(shown) <= _ID_SHOWN + 2:
        return shown
    return f"{shown[: _ID_SHOWN + 1]}…"
