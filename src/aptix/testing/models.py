"""Fake models for tests: a scripted queue of responses and a function-driven model."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aptix.errors import LlmError
from aptix.llm.types import LlmRequest, LlmResponse, TextSink, ToolCallRequest, Usage

__all__ = ["FunctionModel", "ScriptedModel", "call", "reply"]

_ids = itertools.count(1)


def call(
    name: str, arguments: dict[str, Any] | str | None = None, *, id: str | None = None
) -> ToolCallRequest:
    """A tool call for a scripted response; ``arguments`` may be a dict or raw JSON text."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return ToolCallRequest(id or f"call_{next(_ids)}", name, text)


def reply(
    text: str | None = None,
    *calls: ToolCallRequest,
    usage: Usage | None = None,
    model_id: str = "scripted-model",
    refusal: str | None = None,
) -> LlmResponse:
    """A scripted response: text and/or tool calls, or the model's ``refusal``."""
    return LlmResponse(
        text=text,
        tool_calls=tuple(calls),
        usage=usage or Usage(10, 5),
        finish_reason="tool_calls" if calls else "stop",
        model_id=model_id,
        refusal=refusal,
    )


@dataclass
class ScriptedModel:
    """Answers each request with the next scripted response and records every request.

    A scripted ``LlmError`` is raised instead of answered. ``assert_complete()`` fails when
    responses were left unused.
    """

    responses: list[LlmResponse | LlmError] = field(default_factory=list)
    requests: list[LlmRequest] = field(default_factory=list)

    @classmethod
    def of(cls, *responses: LlmResponse | LlmError) -> ScriptedModel:
        """A model answering with ``responses`` in order."""
        return cls(list(responses))

    def add(self, *responses: LlmResponse | LlmError) -> None:
        """Queue more responses."""
        self.responses.extend(responses)

    async def complete(self, request: LlmRequest, on_text: TextSink | None = None) -> LlmResponse:
        """Record the request and return (or raise) the next scripted response."""
        self.requests.append(request)
        if not self.responses:
            raise AssertionError(
                f"ScriptedModel ran out of responses at request #{len(self.requests)}."
            )
        response = self.responses.pop(0)
        if isinstance(response, BaseException):  # LlmError, or a stand-in for a crash
            raise response
        await _stream_words(response, on_text)
        return response

    def assert_complete(self) -> None:
        """Fail if scripted responses were never requested."""
        if self.responses:
            raise AssertionError(f"{len(self.responses)} scripted response(s) were not used.")

    def offered_tools(self, index: int = -1) -> list[str]:
        """The tool names offered in request ``index``."""
        return [t["name"] for t in self.requests[index].tools]


@dataclass
class FunctionModel:
    """Answers each request by calling ``function(request)`` (sync or async)."""

    function: Callable[[LlmRequest], LlmResponse | Awaitable[LlmResponse]]
    requests: list[LlmRequest] = field(default_factory=list)

    async def complete(self, request: LlmRequest, on_text: TextSink | None = None) -> LlmResponse:
        """Record the request and return what the function answers."""
        self.requests.append(request)
        answer = self.function(request)
        response = answer if isinstance(answer, LlmResponse) else await answer
        await _stream_words(response, on_text)
        return response


async def _stream_words(response: LlmResponse, on_text: TextSink | None) -> None:
    # Fake models stream word by word, so streaming consumers are exercised too.
    if on_text is None or not response.text:
        return
    for piece in re.findall(r"\S+\s*|\s+", response.text):
        await on_text(piece)


def tool_results(request: LlmRequest) -> Iterable[dict[str, Any]]:
    """The tool-result messages of a request (handy in function models)."""
    return (m for m in request.messages if m.get("role") == "tool")
