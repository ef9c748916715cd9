"""A stored revision that no longer validates is one org's problem: left out, never fatal."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import aptix.workflows.validation as validation
from aptix.cli.main import app
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from tests.logs import records_of

FIELDS = {
    "userIntentPatterns": ["annotate the report"],
    "instructionText": "1. Annotate it.",
    "permittedTools": ["annot_*"],
    "completionCriteria": ["Annotated."],
}
#: An MCP server that is never started here: it only lends ``annot_*`` to the catalog.
ANNOT = {"annot": {"command": "sh", "args": ["-c", "sleep 60"]}}


def _settings(tmp_path: Path, **servers: Any) -> AptixSettings:
    return AptixSettings(
        data_dir=tmp_path, load_plugins=False, semantic_matching=False, mcp_servers=servers
    )


async def _publish(runtime: Runtime, workflow_id: str, org: str, **fields: Any) -> None:
    authoring = runtime.workflows.authoring
    assert (await authoring.draft(workflow_id, "Annotate", "Annotates.", "ada", org)).ok
    assert (await authoring.update(workflow_id, {**FIELDS, **fields}, "ada", org)).ok
    published = await authoring.publish(workflow_id, "root", org)
    assert published.ok, published


@pytest.fixture
def logged() -> Iterator[list[logging.LogRecord]]:
    """Warnings of ``aptix.workflows``, which open_runtime's logging does not propagate."""
    with records_of("aptix.workflows", logging.WARNING) as records:
        yield records


def _warnings(logged: list[logging.LogRecord]) -> list[str]:
    return [r.getMessage() for r in logged]


async def test_start_up_leaves_out_a_revision_whose_mcp_server_was_removed(
    tmp_path: Path, logged: list[logging.LogRecord]
) -> None:
    async with open_runtime(_settings(tmp_path, **ANNOT), connect_mcp=False) as before:
        await _publish(before, "annotate", "acme")
        await _publish(before, "offsite", "globex", permittedTools=["agent_calculator"])
    logged.clear()
    # The server `annot` is removed from the configuration: start-up must go on.
    async with open_runtime(_settings(tmp_path), connect_mcp=False) as after:
        registry = after.workflows.registry
        assert registry.get("annotate", "acme") is None
        assert registry.get("offsite", "globex") is not None
        assert registry.get("author_workflow", "acme") is not None
    assert _warnings(logged) == [
        "Workflow 'annotate' from store (org acme) revision 3 no longer validates and is not "
        "served: permittedTools.0: permittedTools names an unknown tool 'annot_*' "
        "(a name ending in '*' must be a configured MCP server's <prefix>_*) "
        "(run `aptix workflows validate`)."
    ]


async def test_start_up_leaves_out_a_revision_that_predates_a_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logged: list[logging.LogRecord]
) -> None:
    async with open_runtime(_settings(tmp_path, **ANNOT), connect_mcp=False) as before:
        await _publish(before, "annotate", "acme", notes=["n" * 400])
    monkeypatch.setattr(validation, "MAX_ENTRY_LENGTH", 300)
    logged.clear()
    async with open_runtime(_settings(tmp_path, **ANNOT), connect_mcp=False) as after:
        assert after.workflows.registry.get("annotate", "acme") is None
    [warning] = _warnings(logged)
    assert "'annotate' from store (org acme) revision 3" in warning
    assert "notes.0: notes.0 is too long (400 characters; the limit is 300)" in warning


async def test_a_running_process_warns_once_per_left_out_revision(
    tmp_path: Path, logged: list[logging.LogRecord]
) -> None:
    async with open_runtime(_settings(tmp_path, **ANNOT), connect_mcp=False) as before:
        await _publish(before, "annotate", "acme")
    logged.clear()
    async with open_runtime(_settings(tmp_path), connect_mcp=False) as after:
        await _publish(after, "offsite", "globex", permittedTools=["agent_calculator"])
        assert await after.workflows.refresh() is False  # authoring already synced
        assert after.workflows.registry.get("offsite", "globex") is not None
    assert len(_warnings(logged)) == 1


def test_validate_reports_stored_revisions_that_are_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("APTIX_SEMANTIC_MATCHING", "false")
    monkeypatch.delenv("APTIX_WORKFLOWS_PATH", raising=False)
    monkeypatch.setenv("APTIX_MCP_SERVERS", json.dumps(ANNOT))
    runner = CliRunner()

    async def publish(runtime: Runtime) -> None:
        await _publish(runtime, "annotate", "acme")

    from aptix.cli.runtime import run_with_runtime

    run_with_runtime(publish, connect_mcp=False)
    valid = runner.invoke(app, ["workflows", "validate", "--json"])
    assert valid.exit_code == 0, valid.output
    assert json.loads(valid.stdout)["stored"] == []

    monkeypatch.delenv("APTIX_MCP_SERVERS")
    listed = runner.invoke(app, ["workflows", "list", "--json", "--org", "acme"])
    assert listed.exit_code == 0, listed.output
    assert "annotate" not in [row["workflowId"] for row in json.loads(listed.stdout)]
    result = runner.invoke(app, ["workflows", "validate"])
    assert result.exit_code == 1, result.output
    assert (
        "Workflow 'annotate' from store (org acme) revision 3 no longer validates and is not "
        "served: permittedTools.0: permittedTools names an unknown tool 'annot_*'"
    ) in " ".join(result.stdout.split())
    as_json = runner.invoke(app, ["workflows", "validate", "--json"])
    assert as_json.exit_code == 1
    payload = json.loads(as_json.stdout)
    assert payload["valid"] is False
    assert payload["problems"] == []
    assert payload["stored"] == [
        {
            "source": "store (org acme) revision 3",
            "workflowId": "annotate",
            "field": "permittedTools.0",
            "message": "permittedTools names an unknown tool 'annot_*' "
            "(a name ending in '*' must be a configured MCP server's <prefix>_*).",
        }
    ]
