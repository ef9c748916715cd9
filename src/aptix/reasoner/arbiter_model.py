"""The configured model, adapted to the workflow match arbiter (only the reasoner calls it)."""

from __future__ import annotations

from typing import Any

from aptix.llm.types import LlmClient, LlmRequest
from aptix.workflows.matching.arbiter import ModelAnswer

__all__ = ["LlmArbiterModel"]


class LlmArbiterModel:
    """An :class:`~aptix.workflows.matching.arbiter.ArbiterModel` over an ``LlmClient``."""

    def __init__(self, client: LlmClient) -> None:
        self._client = client

    async def ask(self, messages: list[dict[str, Any]], tool: dict[str, Any]) -> ModelAnswer:
        """One request offering ``tool``; the client raises ``LlmError`` on failures."""
        response = await self._client.complete(LlmRequest(tuple(messages), (tool,)))
        return ModelAnswer(
            tuple((call.name, call.arguments) for call in response.tool_calls), response.text
        )
