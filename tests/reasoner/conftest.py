from __future__ import annotations

from dataclasses import dataclass

import pytest

from aptix.reasoner import AgentReasoner
from aptix.runtime import Runtime
from aptix.testing import ScriptedModel


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
