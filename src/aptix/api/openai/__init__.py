"""The OpenAI-compatible surface: ``POST /v1/chat/completions`` and ``GET /v1/models``."""
