"""``/workflows`` in ``aptix chat`` lists what the chat's model sees: its org's workflows too."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from aptix.cli import output
from aptix.cli.chat_commands import ChatState, open_session, run_command
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings

FIELDS = {
    "userIntentPatterns": ["do the local thing"],
    "instructionText": "1. Do it.",
    "permittedTools": ["agent_calculator"],
    "completionCriteria": ["Done."],
}


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output.console, "_width", 240)


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, semantic_matching=False)
    async with open_runtime(settings) as opened:
        yield opened


async def _publish(runtime: Runtime, workflow_id: str, org: str) -> None:
    authoring = runtime.workflows.authoring
    assert (await authoring.draft(workflow_id, "Local thing", "A local one.", "ada", org)).ok
    assert (await authoring.update(workflow_id, FIELDS, "ada", org)).ok
    assert (await authoring.publish(workflow_id, "ada", org)).ok


async def test_the_workflows_command_lists_the_chat_orgs_workflows_as_its_model_does(
    runtime: Runtime,
) -> None:
    await _publish(runtime, "local_wf", "local")
    await _publish(runtime, "elsewhere_wf", "globex")
    state = ChatState(await open_session(runtime, None, None))
    with output.console.capture() as captured:
        assert not await run_command(runtime, state, "/workflows")
    shown = re.findall(r"^  (\S+) — ", captured.get(), re.MULTILINE)
    # What the session's model gets from list_workflows.
    context = await runtime.session_context(
        org="local", user="local", role="user", session_id=state.session_id
    )
    listed = await runtime.executor.invoke(
        "agent_workflow_registry", '{"operation": "list_workflows"}', context
    )
    seen = [row["workflowId"] for row in json.loads(listed.result or "")["workflows"]]
    assert "local_wf" in shown
    assert "elsewhere_wf" not in shown
    assert shown == seen
