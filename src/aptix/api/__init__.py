"""The HTTP API (FastAPI): sessions, tools, modes, workflows and the agent loop."""

from aptix.api.app import create_app

__all__ = ["create_app"]
