"""``aptix workflows match`` answers as ``match_workflow`` does: same limit, same arbiter."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.testing import call, reply
from aptix.testing.server import ScriptedOpenAIServer
from aptix.tools.builtin.workflow_registry import MAX_MESSAGE_LENGTH

runner = CliRunner()
MESSAGE = "I'd like to write a new workflow for onboarding"


def _none(body: dict[str, Any]) -> Any:
    """The arbiter's model: no listed workflow fits."""
    return reply(None, call("choose_workflow", {"workflowId": "none"}))


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedOpenAIServer]:
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("APTIX_SEMANTIC_MATCHING", "false")
    monkeypatch.delenv("APTIX_WORKFLOWS_PATH", raising=False)
    with ScriptedOpenAIServer(respond=_none) as server:
        monkeypatch.setenv("APTIX_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("APTIX_LLM_MODEL", "scripted")
        monkeypatch.setenv("APTIX_LLM_MAX_RETRIES", "0")
        yield server


def test_with_the_arbiter_always_on_the_model_decides_as_for_match_workflow(
    model: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APTIX_MATCH_ARBITER", "off")
    ranked = runner.invoke(app, ["workflows", "match", MESSAGE, "--json"])
    assert ranked.exit_code == 0, ranked.output
    assert json.loads(ranked.stdout)["matches"][0]["workflowId"] == "author_workflow"
    assert model.requests == []
    monkeypatch.setenv("APTIX_MATCH_ARBITER", "always")
    arbitrated = runner.invoke(app, ["workflows", "match", MESSAGE, "--json"])
    assert arbitrated.exit_code == 0, arbitrated.output
    assert json.loads(arbitrated.stdout) == {"matches": []}  # the model said none
    assert len(model.requests) == 1
    offered = [tool["function"]["name"] for tool in model.requests[0]["tools"]]
    assert offered == ["choose_workflow"]


@pytest.mark.usefixtures("model")
def test_a_message_over_the_limit_is_refused_on_one_line_with_exit_code_2() -> None:
    result = runner.invoke(app, ["workflows", "match", "a" * (MAX_MESSAGE_LENGTH + 1)])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: The message is too long ({MAX_MESSAGE_LENGTH + 1} characters; "
        f"the limit is {MAX_MESSAGE_LENGTH}).\n"
    )
    assert result.stdout == ""
    at_limit = runner.invoke(app, ["workflows", "match", " " + "a" * MAX_MESSAGE_LENGTH + " "])
    assert at_limit.exit_code == 0, at_limit.output


@pytest.mark.usefixtures("model")
@pytest.mark.parametrize("message", ["", "   \n"])
def test_an_empty_message_is_bad_input_too(message: str) -> None:
    result = runner.invoke(app, ["workflows", "match", message])
    assert result.exit_code == 2, result.output
    assert result.stderr == "error: The message must not be empty.\n"
