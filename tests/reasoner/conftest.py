from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from aptix.reasoner import AgentReasoner
from aptix.runtime import Runtime
from aptix.testing import ScriptedModel
from aptix.tools.executor import AgentToolExecutor


class Died(BaseException):
    """Stands in for kill -9: nothing after it runs in this process."""


@pytest.fixture(autouse=True)
def _died_kills_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool raising ``Died`` is the process dying: the executor contains any other raise."""
    crashed = AgentToolExecutor._crashed

    def dying(self: AgentToolExecutor, tool: Any, exc: BaseException, context: Any) -> Any:
        if isinstance(exc, Died):
            raise exc
        return crashed(self, tool, exc, context)

    monkeypatch.setattr(AgentToolExecutor, "_crashed", dying)


@dataclass
class Harness:
    runtime: Runtime
    model: ScriptedModel
    reasoner: AgentReasoner
    session_id: str


@pytest.fixture
async def harness(runtime: Runtime) -> Harness:
    model = ScriptedModel()
    created = await runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    return Harness(runtime, model, runtime.reasoner(model), created.result.id)
