"""``MeteredModel``: an ``LlmClient`` that checks the org's token budget and records usage."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from aptix.errors import LlmError
from aptix.llm.types import LlmClient, LlmRequest, LlmResponse, TextSink
from aptix.quotas.limiter import Quotas

__all__ = ["PAYER", "LimitsUnavailableError", "MeteredModel", "Payer", "TokenBudgetError"]


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
    """Wraps a model: refuses a call once the budget is spent, records each call's tokens.

    A refusal is a :class:`TokenBudgetError` (or, while the limits cannot be checked, a
    :class:`LimitsUnavailableError`), an ``LlmError``, so a turn refused part-way ends like
    any failed model call: recorded with status ``error`` and the message, under its own code.
    """

    def __init__(self, model: LlmClient, quotas: Quotas) -> None:
        self._model = model
        self._quotas = quotas

    @property
    def inner(self) -> LlmClient:
        """The wrapped model."""
        return self._model

    def __getattr__(self, name: str) -> Any:
        # The model's own attributes (``model``, ``temperature``) for tracing and callers.
        return getattr(self._model, name)

    async def complete(self, request: LlmRequest, on_text: TextSink | None = None) -> LlmResponse:
        """Check the budget, call the model, record what the call used."""
        payer = PAYER.get()
        if payer is None:
            return await self._model.complete(request, on_text)
        refusal = await self._quotas.tokens(payer.org)
        if refusal is not None:
            unavailable = refusal.code == LimitsUnavailableError.code
            raise (LimitsUnavailableError if unavailable else TokenBudgetError)(refusal.message)
        response = await self._model.complete(request, on_text)
        await self._quotas.spend(payer.org, payer.key_id, payer.user, response.usage)
        return response
