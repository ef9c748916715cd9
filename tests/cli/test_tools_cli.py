from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _isolated_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))


def test_tools_list_json_names_every_builtin() -> None:
    result = runner.invoke(app, ["tools", "list", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["agent_calculator"]["serverFinal"] is True
    assert rows["request_user_approval"]["serverFinal"] is False


def test_tools_list_table_is_readable() -> None:
    result = runner.invoke(app, ["tools", "list"])
    assert result.exit_code == 0
    assert "agent_hello_world" in result.stdout


def test_tools_schema_prints_the_schema() -> None:
    result = runner.invoke(app, ["tools", "schema", "agent_calculator"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["parameters"]["required"] == ["expression"]


def test_tools_schema_of_unknown_tool_fails_cleanly() -> None:
    result = runner.invoke(app, ["tools", "schema", "nope"])
    assert result.exit_code == 1
    assert "Unknown tool 'nope'" in result.stderr


def test_tools_call_json_prints_the_invoke_result() -> None:
    result = runner.invoke(
        app, ["tools", "call", "agent_calculator", '{"expression": "2*(3+4)"}', "--json"]
    )
    assert result.exit_code == 0
    payload = json.loads(result.stdout)
    assert payload["successful"] is True
    assert payload["errors"] == []
    assert payload["result"]["result"] == 14


def test_tools_call_passes_the_session_id() -> None:
    created = runner.invoke(app, ["sessions", "create", "--json"])
    session_id = json.loads(created.stdout)["sessionId"]
    result = runner.invoke(
        app, ["tools", "call", "agent_hello_world", '{"name": "Ann"}', "--session-id", session_id]
    )
    assert result.exit_code == 0
    assert json.loads(result.stdout)["sessionId"] == session_id


def test_tools_call_refuses_a_session_that_is_not_the_callers() -> None:
    created = runner.invoke(app, ["sessions", "create", "--json"])
    session_id = json.loads(created.stdout)["sessionId"]
    for who in (["--org", "globex"], ["--user", "eve"], []):
        result = runner.invoke(
            app,
            ["tools", "call", "agent_hello_world", "{}", "--session-id", session_id, *who]
            if who
            else ["tools", "call", "agent_hello_world", "{}", "--session-id", "f" * 32],
        )
        assert result.exit_code == 1
        assert "Unknown session" in result.stderr


def test_tools_call_with_bad_json_fails_without_traceback() -> None:
    result = runner.invoke(app, ["tools", "call", "agent_calculator", "not json"])
    assert result.exit_code == 1
    assert "Arguments must be a valid JSON object" in result.stderr
    assert "Traceback" not in result.output


def test_tools_call_failure_json_exits_non_zero() -> None:
    result = runner.invoke(
        app, ["tools", "call", "agent_calculator", '{"expression": "1/0"}', "--json"]
    )
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload == {
        "successful": False,
        "result": None,
        "errors": [{"message": "Division by zero is not defined."}],
    }


def test_the_installed_script_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "aptix", "tools", "call", "agent_calculator", "not json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "error:" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("reason", "refused"),
    [
        ("a\\u0000b", "NUL characters (\\u0000) are not accepted in text (found in 'reason')."),
        ("a\\ud800b", "Lone surrogate characters (\\ud800-\\udfff without their pair) are not"),
        # A byte that is not UTF-8 in argv: named as such, not as Python's stand-in for it.
        ("caf\udce9", "The byte 0xe9 is not valid UTF-8; text must be UTF-8 (found in ARGUMENTS)."),
    ],
    ids=["nul", "lone-surrogate", "not-utf8"],
)
def test_tools_call_refuses_unstorable_text_as_http_and_mcp_do(
    reason: str, refused: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APTIX_DATABASE_URL", database_url)
    created = runner.invoke(app, ["sessions", "create", "--json"])
    session_id = json.loads(created.stdout)["sessionId"]
    arguments = f'{{"modeKey": "calculation", "reason": "{reason}"}}'
    result = runner.invoke(
        app, ["tools", "call", "agent_change_mode", arguments, "--session-id", session_id]
    )
    assert result.exit_code == 2, result.output  # refused typed input, not a failed call
    assert result.stderr.startswith(f"error: {refused}"), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    shown = runner.invoke(app, ["sessions", "show", session_id, "--json"])
    assert json.loads(shown.stdout)["mode"] == "general"  # nothing stored
