"""A name ending in ``*`` is valid only as a configured MCP server's ``<prefix>_*``.

``*``, ``a*`` or ``agent_work*`` would take built-in tools (``agent_workflow_authoring``
included) and switch the workflow guard off, so every path that checks a manifest refuses
them: files at start-up, ``aptix workflows validate``, and authoring.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.errors import ConfigurationError
from aptix.modes.catalog import load_mode_catalog
from aptix.testing import RecordingLogger
from aptix.tools.builtin.workflow_authoring import WorkflowAuthoringTool
from aptix.workflows.authoring import WorkflowAuthoring
from aptix.workflows.loader import collect_catalog
from aptix.workflows.registry import WorkflowRegistry
from aptix.workflows.store import InMemoryWorkflowStore
from aptix.workflows.validation import validate_manifest
from tests.workflows.conftest import KNOWN_TOOLS, make_manifest

BAD_PATTERNS = ["*", "a*", "agent_work*", "AGENT_WORK*", "time_get*"]
HINT = "(a name ending in '*' must be a configured MCP server's <prefix>_*)"

FLOW = """\
workflowId: star_flow
title: Star
description: Permits a pattern.
version: 1.0.0
userIntentPatterns: [run the star flow]
instructionText: Run.
permittedTools: ["{tool}"]
completionCriteria: [Done.]
"""


def _problems(tool: str, known: tuple[str, ...] = KNOWN_TOOLS) -> dict[str, str]:
    manifest = make_manifest("star_flow", permittedTools=[tool])
    return {p.field: p.message for p in validate_manifest(manifest, known)}


@pytest.mark.parametrize("pattern", BAD_PATTERNS)
def test_a_pattern_that_is_not_a_server_prefix_is_an_unknown_tool(pattern: str) -> None:
    # time_get* is refused even beside time_*: only the server's own pattern is lent.
    known = (*KNOWN_TOOLS, "time_get_current_time", "time_*")
    assert _problems(pattern, known)["permittedTools.0"] == (
        f"permittedTools names an unknown tool '{pattern}' {HINT}."
    )


def test_a_configured_servers_prefix_is_accepted_in_any_casing() -> None:
    known = (*KNOWN_TOOLS, "time_*")
    assert "permittedTools.0" not in _problems("time_*", known)
    assert "permittedTools.0" not in _problems("TIME_*", known)
    # A server that is not configured lends nothing, even if tools of that name exist.
    assert "permittedTools.0" in _problems("time_*", (*KNOWN_TOOLS, "time_get_current_time"))


def test_start_up_refuses_a_file_permitting_star(tmp_path: Path) -> None:
    (tmp_path / "star.yaml").write_text(FLOW.format(tool="*"), encoding="utf-8")
    _, problems = collect_catalog(KNOWN_TOOLS, tmp_path)
    assert [(p.workflow_id, p.field) for p in problems] == [("star_flow", "permittedTools.0")]
    assert HINT in problems[0].message


async def test_authoring_refuses_to_validate_or_publish_a_wildcard(context) -> None:
    registry = WorkflowRegistry(known_tools=KNOWN_TOOLS)
    tool = WorkflowAuthoringTool(
        WorkflowAuthoring(InMemoryWorkflowStore(), registry), RecordingLogger()
    )

    async def call(**args: object) -> dict[str, object]:
        outcome = await tool.execute(json.dumps(args), context)
        assert outcome.successful, outcome.error_message
        assert outcome.result is not None
        result: dict[str, object] = json.loads(outcome.result)
        return result

    await call(operation="draft_workflow", workflowId="wild", title="Wild", description="d")
    fields = {
        "userIntentPatterns": ["run the wild flow"],
        "instructionText": "x",
        "permittedTools": ["agent_work*"],
        "completionCriteria": ["done"],
    }
    await call(operation="update_workflow", workflowId="wild", fields=fields)
    for operation in ("validate_workflow", "publish_workflow"):
        result = await call(operation=operation, workflowId="wild")
        assert result["ok"] is False, operation
        assert {
            "field": "permittedTools.0",
            "message": (f"permittedTools names an unknown tool 'agent_work*' {HINT}."),
        } in result["errors"]  # type: ignore[operator]
    assert registry.get("wild", "acme") is None


def test_cli_validate_refuses_a_pattern_under_a_servers_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("APTIX_SEMANTIC_MATCHING", "false")
    monkeypatch.delenv("APTIX_WORKFLOWS_PATH", raising=False)
    # Never started: validate checks MCP tools by prefix only.
    servers = {"files": {"command": "false", "prefix": "fs"}}
    monkeypatch.setenv("APTIX_MCP_SERVERS", json.dumps(servers))
    flows = tmp_path / "flows"
    flows.mkdir()
    runner = CliRunner()
    for tool, valid in (("*", False), ("fs_read*", False), ("fs_*", True), ("fs_read", True)):
        (flows / "star.yaml").write_text(FLOW.format(tool=tool), encoding="utf-8")
        result = runner.invoke(app, ["workflows", "validate", str(flows), "--json"])
        payload = json.loads(result.stdout)
        assert payload["valid"] is valid, (tool, payload)
        assert result.exit_code == (0 if valid else 1)
        if not valid:
            assert [p["field"] for p in payload["problems"]] == ["permittedTools.0"]


def test_a_mode_listing_star_is_refused(tmp_path: Path) -> None:
    # Modes share the rule (docs/mcp-servers.md: "in modes and workflows alike").
    path = tmp_path / "modes.yaml"
    path.write_text(
        "modes:\n"
        f"  - id: {'a' * 32}\n"
        "    key: alpha\n"
        "    displayName: Alpha\n"
        "    description: A mode.\n"
        "    isDefault: true\n"
        "    instructions: Behave.\n"
        '    tools: ["*"]\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigurationError, match=r"mode 'alpha': unknown tool\(s\) \*"):
        load_mode_catalog(path, registered_tools=["agent_calculator"])
