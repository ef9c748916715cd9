from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.workflows.matching.semantic import forget_built

runner = CliRunner()

BROKEN = """\
workflowId: broken_flow
title: Broken
description: Broken on purpose.
version: 1.0.0
userIntentPatterns: [break things]
instructionText: Break.
permittedTools: [agent_does_not_exist]
completionCriteria: [Broken.]
"""


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("APTIX_SEMANTIC_MATCHING", "false")
    monkeypatch.delenv("APTIX_WORKFLOWS_PATH", raising=False)


def test_list_json_shows_public_workflows_but_not_hidden_ones() -> None:
    result = runner.invoke(app, ["workflows", "list", "--json"])
    assert result.exit_code == 0, result.output
    ids = [row["workflowId"] for row in json.loads(result.stdout)]
    assert "author_workflow" in ids
    assert "workflow_diagnostics" not in ids


def test_list_all_includes_hidden_ones() -> None:
    result = runner.invoke(app, ["workflows", "list", "--all", "--json"])
    rows = {row["workflowId"]: row for row in json.loads(result.stdout)}
    assert rows["workflow_diagnostics"]["visibility"] == "hidden"


def test_list_table_is_readable() -> None:
    result = runner.invoke(app, ["workflows", "list"])
    assert result.exit_code == 0
    assert "guided_calculation" in result.stdout


def test_show_a_hidden_workflow_by_id() -> None:
    result = runner.invoke(app, ["workflows", "show", "workflow_diagnostics", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["workflow"]["visibility"] == "hidden"
    assert payload["source"] == "builtin:workflow_diagnostics.yaml"
    table = runner.invoke(app, ["workflows", "show", "workflow_diagnostics"])
    assert "Workflow registry diagnostics" in table.stdout


def test_show_unknown_workflow_fails_cleanly() -> None:
    result = runner.invoke(app, ["workflows", "show", "nope"])
    assert result.exit_code == 1
    assert "Unknown workflow 'nope'." in result.stderr


def test_match_ranks_the_authoring_workflow_first() -> None:
    result = runner.invoke(
        app, ["workflows", "match", "I'd like to write a new workflow for onboarding", "--json"]
    )
    assert result.exit_code == 0, result.output
    matches = json.loads(result.stdout)["matches"]
    assert matches[0]["workflowId"] == "author_workflow"
    table = runner.invoke(app, ["workflows", "match", "what time is it"])
    assert "No workflow matches." in table.stdout


def test_match_with_the_semantic_matcher_ranks_the_authoring_workflow_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("APTIX_SEMANTIC_MATCHING")  # default: on, the extra is installed
    result = runner.invoke(
        app, ["workflows", "match", "I'd like to write a new workflow for onboarding", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["matches"][0]["workflowId"] == "author_workflow"


def test_validate_passes_on_the_builtin_catalog() -> None:
    result = runner.invoke(app, ["workflows", "validate", "--json"])
    assert result.exit_code == 0
    payload = json.loads(result.stdout)
    assert payload["valid"] is True
    assert payload["workflows"] >= 4


def test_validate_a_broken_folder_exits_non_zero_naming_the_problem(tmp_path: Path) -> None:
    folder = tmp_path / "flows"
    folder.mkdir()
    (folder / "broken.yaml").write_text(BROKEN, encoding="utf-8")
    result = runner.invoke(app, ["workflows", "validate", str(folder)])
    assert result.exit_code == 1
    assert "broken.yaml" in result.stdout
    assert "workflow 'broken_flow', field 'permittedTools.0'" in result.stdout
    assert "unknown tool 'agent_does_not_exist'" in result.stdout
    as_json = runner.invoke(app, ["workflows", "validate", str(folder), "--json"])
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout)["problems"][0]["workflowId"] == "broken_flow"


def test_validate_a_missing_path_fails_cleanly(tmp_path: Path) -> None:
    result = runner.invoke(app, ["workflows", "validate", str(tmp_path / "missing")])
    assert result.exit_code == 2  # a bad PATH, not a catalog with problems (exit code 1)
    assert "does not exist" in result.stderr


def test_a_broken_workflows_path_stops_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken.yaml").write_text(BROKEN, encoding="utf-8")
    monkeypatch.setenv("APTIX_WORKFLOWS_PATH", str(tmp_path))
    result = runner.invoke(app, ["workflows", "list"])
    assert result.exit_code == 2
    assert "unknown tool 'agent_does_not_exist'" in result.stderr
    assert "Traceback" not in result.output


def test_authoring_tool_is_callable_from_the_cli() -> None:
    result = runner.invoke(
        app,
        ["tools", "call", "agent_workflow_authoring", '{"operation": "list_authoring_workflows"}'],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"] is True


def test_match_waits_for_the_cascade_and_other_commands_leave_it_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from aptix.cli.runtime import run_with_runtime
    from aptix.runtime import Runtime
    from aptix.settings import load_settings

    monkeypatch.delenv("APTIX_SEMANTIC_MATCHING")
    monkeypatch.delenv("APTIX_MATCH_CASCADE", raising=False)

    async def settled(runtime: Runtime) -> bool | None:
        return runtime.workflows.registry.settle(None, 120)

    # The weights are installed here: a command that matches builds and waits for the index;
    # any other one-shot command never loads the larger encoder unless it is asked for.
    assert run_with_runtime(settled, load_settings(), matches=True) is True
    assert run_with_runtime(settled, load_settings()) is None
    monkeypatch.setenv("APTIX_MATCH_CASCADE", "true")
    assert run_with_runtime(settled, load_settings()) is True
    monkeypatch.setenv("APTIX_MATCH_CASCADE", "false")
    assert run_with_runtime(settled, load_settings(), matches=True) is None


def test_match_says_when_the_cascade_index_was_not_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    import aptix.cli.workflows as workflows_cli

    monkeypatch.delenv("APTIX_SEMANTIC_MATCHING")
    monkeypatch.delenv("APTIX_MATCH_CASCADE", raising=False)
    monkeypatch.setattr(workflows_cli, "CASCADE_WAIT_SECONDS", 0.0)
    # A command's first index in its process: none of this worker's runtimes lends it theirs.
    forget_built()
    message = "I'd like to write a new workflow for onboarding"
    result = runner.invoke(app, ["workflows", "match", message, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["matches"][0]["workflowId"] == "author_workflow"
    assert "index was not built within 0 s" in result.stderr
    assert "MiniLM's order" in result.stderr


def test_match_says_it_waits_for_the_cascade_index_when_it_takes_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from aptix.workflows.registry import WorkflowRegistry

    waits: list[float | None] = []

    def slow_settle(self: WorkflowRegistry, org: str | None, timeout: float | None) -> bool:
        waits.append(timeout)
        return len(waits) > 1  # not ready within the first second, ready after

    monkeypatch.setattr(WorkflowRegistry, "settle", slow_settle)
    result = runner.invoke(app, ["workflows", "match", "what time is it"])
    assert result.exit_code == 0, result.output
    assert waits == [1.0, 59.0]
    assert "Building the larger encoder's index" in result.stderr
    assert "not built within" not in result.stderr


def _flow_permitting(tool: str) -> str:
    return BROKEN.replace("broken_flow", "outside_flow").replace("agent_does_not_exist", tool)


def test_validate_knows_the_tools_loaded_from_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "count.yaml").write_text(_flow_permitting("word_count"), encoding="utf-8")
    examples = Path(__file__).resolve().parents[2] / "examples" / "tools.py"
    monkeypatch.setenv("APTIX_TOOL_MODULES", json.dumps([str(examples)]))
    result = runner.invoke(app, ["workflows", "validate", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["valid"] is True
    # ...as start-up does, which serves the folder.
    monkeypatch.setenv("APTIX_WORKFLOWS_PATH", str(tmp_path))
    listed = runner.invoke(app, ["workflows", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    assert "outside_flow" in [row["workflowId"] for row in json.loads(listed.stdout)]


def test_validate_names_a_tool_file_that_does_not_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APTIX_TOOL_MODULES", json.dumps([str(tmp_path / "absent.py")]))
    result = runner.invoke(app, ["workflows", "validate"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: "), result.stderr
    assert "absent.py" in result.stderr
    assert "Traceback" not in result.output


def test_validate_checks_mcp_tools_by_prefix_without_starting_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = tmp_path / "started"
    command = f"touch {started}; sleep 60"  # a server that would leave a trace if started
    monkeypatch.setenv(
        "APTIX_MCP_SERVERS",
        json.dumps({"files": {"command": "sh", "args": ["-c", command], "prefix": "fs"}}),
    )
    for tool in ("fs_*", "fs_read_file"):
        (tmp_path / "flow.yaml").write_text(_flow_permitting(tool), encoding="utf-8")
        result = runner.invoke(app, ["workflows", "validate", str(tmp_path)])
        assert result.exit_code == 0, result.output
        assert "tools under fs_* are checked by prefix only" in result.stdout
        as_json = runner.invoke(app, ["workflows", "validate", str(tmp_path), "--json"])
        assert json.loads(as_json.stdout)["note"].endswith("checked by prefix only.")
    (tmp_path / "flow.yaml").write_text(_flow_permitting("files_read"), encoding="utf-8")
    result = runner.invoke(app, ["workflows", "validate", str(tmp_path)])
    assert result.exit_code == 1
    assert "unknown tool 'files_read'" in result.stdout
    assert not started.exists()
