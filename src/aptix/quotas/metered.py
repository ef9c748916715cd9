"""``MeteredModel``: an ``LlmClient`` that checks the org's token budget and records usage."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from aptix.errors import LlmError
from aptix.llm.heard import hearing
from aptix.llm.types import LlmClient, LlmRequest, LlmResponse, TextSink, Usage
from aptix.quotas.holds import Hold
from aptix.quotas.limiter import Quotas
from aptix.quotas.refusal import Refusal

__all__ = ["PAYER", "LimitsUnavailableError", "MeteredModel", "Payer", "TokenBudgetError"]

_log = logging.getLogger("aptix.quotas")


@dataclass(frozen=True, slots=True)
class Payer:
    """Whose turn a model call belongs to: the org's budget and the key's usage row."""

    org: str
    key_id: str
    user: str


#: Set by the surface that starts a turn (the HTTP route); unset, calls are not metered.
PAYER: ContextVar[Payer | None] = ContextVar("aptix_payer", default=None)


class TokenBudgetError(LlmError):
    """The org's model token budget is used up: the turn ends as a failed model call."""

    code = "token_budget_exhausted"


class LimitsUnavailableError(LlmError):
    """The limits cannot be checked (Redis is down, ``closed``): the model call is refused."""

    code = "limits_unavailable"


class MeteredModel:
    """Wraps a model: holds the budget a call needs, then records what the call used.

    Before each call the prompt's estimated tokens are held on the org's budget
    (:meth:`Quotas.reserve`), so turns running at once see each other's calls; once the call
    returns, the hold is settled to the tokens the model reported. A call cut short (the
    client hung up on a stream, the server stops) or failed after it began to answer is
    still charged, and shows in the usage counts: its prompt, estimated, plus what it had
    streamed (text, and the tool calls or refusal it was writing, :mod:`aptix.llm.heard`),
    estimated (its turn records the same estimate, marked so). A call that ended before
    any of it came is not, whether it failed (refused, unreachable, timed out)
    or was cancelled (the match arbiter's time limit, a turn's cancel): its hold is given
    back, as the turn records no usage for it.

    A refusal is a :class:`TokenBudgetError` (or, while the limits cannot be checked, a
    :class:`LimitsUnavailableError`), an ``LlmError``, so a turn refused part-way ends like
    any failed model call: recorded with status ``error`` and the message, under its own code.
    """

    def __init__(
        self,
        model: LlmClient,
        quotas: Quotas,
        *,
        prompt_tokens: Callable[[LlmRequest], int] | None = None,
        text_tokens: Callable[[str], int] | None = None,
    ) -> None:
        self._model = model
        self._quotas = quotas
        self._prompt_tokens = prompt_tokens or _estimated_prompt
        self._text_tokens = text_tokens or _estimated

    @property
    def inner(self) -> LlmClient:
        """The wrapped model."""
        return self._model

    def __getattr__(self, name: str) -> Any:
        # The model's own attributes (``model``, ``temperature``) for tracing and callers.
        return getattr(self._model, name)

    async def complete(self, request: LlmRequest, on_text: TextSink | None = None) -> LlmResponse:
        """Hold the budget, call the model, record what the call used."""
        payer = PAYER.get()
        if payer is None:
            return await self._model.complete(request, on_text)
        prompt = self._prompt_tokens(request)
        held = await self._quotas.reserve(payer.org, prompt)
        if isinstance(held, Refusal):
            unavailable = held.code == LimitsUnavailableError.code
            raise (LimitsUnavailableError if unavailable else TokenBudgetError)(held.message)
        streamed: list[str] = []
        sink: TextSink | None = None
        if on_text is not None:
            forward = on_text

            async def sink(text: str) -> None:
                streamed.append(text)  # first: the model sent it, whether the client reads it
                await forward(text)

        try:
            # What it writes besides text (a tool call's arguments, a refusal) is billed too.
            with hearing(streamed):
                response = await self._model.complete(request, sink)
        except (Exception, asyncio.CancelledError):
            if streamed:
                await asyncio.shield(self._charge_cut(payer, prompt, streamed, held))
            else:  # nothing came back: nothing to charge, as the turn's record says
                await asyncio.shield(self._quotas.release(payer.org, held))
            raise
        # Shielded: a client that hangs up now must not take the record of a finished call.
        await asyncio.shield(
            self._quotas.spend(payer.org, payer.key_id, payer.user, response.usage, held=held)
        )
        return response

    async def _charge_cut(self, payer: Payer, prompt: int, streamed: list[str], held: Hold) -> None:
        """Charge a call that began to answer but never returned: the provider bills it."""
        usage = Usage(prompt, self._text_tokens("".join(streamed)))
        _log.info(
            "[Quotas_Charge__Estimated] a model call cut short is charged an estimate: "
            "%d prompt and %d completion tokens",
            usage.prompt_tokens,
            usage.completion_tokens,
        )
        await self._quotas.spend(payer.org, payer.key_id, payer.user, usage, held=held)


def _estimated(text: str) -> int:
    """One token per 3 bytes of UTF-8, as the reasoner estimates without tiktoken."""
    return -(-len(text.encode("utf-8")) // 3)


def _estimated_prompt(request: LlmRequest) -> int:
    """The request's messages and tool schemas as sent, estimated."""
    return _estimated(json.dumps([request.messages, request.tools], ensure_ascii=False))
