"""Talking to the model: the ``LlmClient`` protocol and the OpenAI-compatible client."""

from aptix.llm.types import LlmClient, LlmRequest, LlmResponse, ToolCallRequest, Usage

__all__ = ["LlmClient", "LlmRequest", "LlmResponse", "ToolCallRequest", "Usage"]
