"""A tool under an approval policy, as the reasoner's tests stage one: it asks, then acts."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest

from aptix import AgentTool, InvokeResult
from aptix.tools import AgentToolExecutionContext, function_schema
from aptix.tools.args import ToolArgs
from tests.reasoner.conftest import Harness


class _Args(ToolArgs):
    pass


class GatedTool(AgentTool):
    """Like an MCP tool under an approval policy: asks first, acts once approved.

    Its call answers the approval request asking ``PROMPT``; the reasoner runs
    ``run_approved``, which a subclass writes, once the client approves.
    """

    TOOL_NAME = "gated"
    TOOL_USAGE_METADATA: ClassVar[str] = "Acts after approval."
    DESCRIPTION: ClassVar[str] = "Acts."
    PROMPT: ClassVar[str] = "Act?"
    is_fully_executed_on_server: ClassVar[bool] = False

    def __init__(self, logger: Any) -> None:
        self.logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The tool's schema: no arguments."""
        return function_schema(cls.TOOL_NAME, cls.DESCRIPTION, _Args)

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        """The approval request: nothing is done until it is approved."""
        return InvokeResult.create(json.dumps({"kind": "approval_request", "prompt": self.PROMPT}))


def register_unguarded(h: Harness, monkeypatch: pytest.MonkeyPatch, *tools: Any) -> None:
    """Register ``tools`` on the harness's runtime, the mode guard out: the test offers them."""
    monkeypatch.setattr(h.runtime.executor, "_guard", None)
    for tool in tools:
        h.runtime.registry.register(tool)


#: What the tools of a test did, in order: each test clears it first.
RUNS: list[str] = []


class Wipe(GatedTool):
    """Asks first, wipes once approved: not safe to run twice."""

    TOOL_NAME = "wipe"
    TOOL_USAGE_METADATA: ClassVar[str] = "Wipes after approval; not safe to run twice."
    DESCRIPTION: ClassVar[str] = "Wipes."
    PROMPT: ClassVar[str] = "Wipe?"

    async def run_approved(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        """Wipes, once: the test reads ``RUNS``."""
        RUNS.append("wipe")
        return InvokeResult.create('{"wiped": true}')
