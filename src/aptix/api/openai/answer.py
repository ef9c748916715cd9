"""The answer's content: the texts of the request's model calls, as the client receives them.

A turn may call the model several times (some text, a server tool, then more text). A stream
sends each call's text as it comes, a blank line between calls; the plain answer carries the
same content, so a client that keeps either holds the same conversation, and its fingerprint
finds the session again. An answer in a ``response_format`` is the last call's text alone
(:func:`last_said`): a client parses it, and the text said beside tool calls is no part of it,
so one that hands client calls over has no content.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from aptix.llm.types import Message

__all__ = ["SEPARATOR", "StreamedText", "content_of", "last_said", "refused_in", "said_in"]

#: Between the texts of two model calls of one answer.
SEPARATOR = "\n\n"


def content_of(texts: Iterable[str]) -> str:
    """The content of an answer whose model calls said ``texts``."""
    return SEPARATOR.join(text for text in texts if text)


def said_in(messages: Sequence[Message]) -> str:
    """The content of an answer from the turn's messages this request added."""
    return content_of(str(m.get("content") or "") for m in messages if m["role"] == "assistant")


def last_said(messages: Sequence[Message]) -> str:
    """The content of an answer in a ``response_format``: the last model call's text."""
    said = [m for m in messages if m["role"] == "assistant"]
    if not said or said[-1].get("tool_calls"):
        # A call that hands tools over gives no final answer yet: the text beside its calls
        # is no part of one (a client would parse it), so the hand-off has no content.
        return ""
    return str(said[-1].get("content") or "")


def refused_in(messages: Sequence[Message]) -> str | None:
    """The model's refusal (OpenAI's ``message.refusal``), if its last call declined; else None."""
    said = [m for m in messages if m["role"] == "assistant"]
    return str(said[-1]["refusal"]) if said and said[-1].get("refusal") else None


class StreamedText:
    """What a stream has sent of the content, one model call's text after another."""

    def __init__(self) -> None:
        self._sent: list[str] = []
        #: Whether the model call under way has sent text yet.
        self._calling = False

    def piece(self, delta: str) -> str:
        """What to send for ``delta``, a streamed piece of the current model call's text."""
        if not delta:
            return ""
        if not self._calling and self._sent:
            delta = SEPARATOR + delta
        self._calling = True
        self._sent.append(delta)
        return delta

    def call_ended(self, text: str) -> str:
        """What is left to send of a model call that said ``text``: all of it, if not streamed."""
        unsent = "" if self._calling else self.piece(text)
        self._calling = False
        return unsent

    @property
    def content(self) -> str:
        """Everything sent so far."""
        return "".join(self._sent)
