from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _isolated_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))


def _create() -> str:
    result = runner.invoke(app, ["sessions", "create", "--json"])
    assert result.exit_code == 0, result.output
    return str(json.loads(result.stdout)["sessionId"])


def test_change_mode_with_branch_through_the_cli_is_visible_in_show() -> None:
    session_id = _create()
    args = '{"mode":"workflow_authoring","branch":true,"reason":"user asked"}'
    called = runner.invoke(
        app, ["tools", "call", "agent_change_mode", args, "--session-id", session_id, "--json"]
    )
    assert called.exit_code == 0, called.output
    child_id = json.loads(called.stdout)["result"]["branchedSessionId"]

    shown = runner.invoke(app, ["sessions", "show", session_id, "--json"])
    session = json.loads(shown.stdout)
    assert session["mode"] == "workflow_authoring"
    [entry] = session["modeHistory"]
    assert (entry["previousMode"], entry["mode"], entry["reason"]) == (
        "general",
        "workflow_authoring",
        "user asked",
    )
    assert session["childSessionIds"] == [child_id]
    child = json.loads(runner.invoke(app, ["sessions", "show", child_id, "--json"]).stdout)
    assert (child["mode"], child["parentSessionId"]) == ("workflow_authoring", session_id)

    table = runner.invoke(app, ["sessions", "show", session_id])
    assert "general" in table.stdout
    assert "user asked" in table.stdout


def test_empty_mode_prints_the_tul007_message_and_changes_nothing() -> None:
    session_id = _create()
    called = runner.invoke(
        app,
        [
            "tools",
            "call",
            "agent_change_mode",
            '{"mode":"","branch":false,"reason":"x"}',
            "--session-id",
            session_id,
        ],
    )
    assert called.exit_code == 1
    assert "ModeChangeTool requires a non-empty 'mode' string." in called.stderr
    session = json.loads(runner.invoke(app, ["sessions", "show", session_id, "--json"]).stdout)
    assert (session["mode"], session["modeHistory"]) == ("general", [])


def test_sessions_list_and_unknown_session() -> None:
    first, second = _create(), _create()
    listed = json.loads(runner.invoke(app, ["sessions", "list", "--json"]).stdout)
    assert {s["sessionId"] for s in listed} == {first, second}
    assert runner.invoke(app, ["sessions", "list"]).exit_code == 0
    missing = runner.invoke(app, ["sessions", "show", "0" * 32])
    assert missing.exit_code == 1
    assert f"Unknown session '{'0' * 32}'" in missing.stderr


def test_sessions_create_in_unknown_mode_fails_cleanly() -> None:
    result = runner.invoke(app, ["sessions", "create", "--mode", "nope"])
    assert result.exit_code == 1
    assert "Unknown mode 'nope'" in result.stderr


def test_modes_list_json_and_table() -> None:
    listed = json.loads(runner.invoke(app, ["modes", "list", "--json"]).stdout)
    assert [m["key"] for m in listed][:2] == ["general", "workflow_authoring"]
    assert "agent_change_mode" in listed[0]["offeredTools"]
    assert runner.invoke(app, ["modes", "list"]).exit_code == 0


def test_db_upgrade_reports_the_revision() -> None:
    result = runner.invoke(app, ["db", "upgrade"])
    assert result.exit_code == 0
    assert "newest revision" in result.stdout


def test_bad_database_url_is_a_clean_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_DATABASE_URL", "not a url")
    result = runner.invoke(app, ["sessions", "list"])
    assert result.exit_code == 2
    assert "APTIX_DATABASE_URL is not a database URL" in result.stderr


def test_unreachable_database_is_a_clean_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("APTIX_DATABASE_URL", "postgresql://postgres@127.0.0.1:1/nowhere")
    result = runner.invoke(app, ["sessions", "list"])
    assert result.exit_code == 2
    # A user name alone may be a token, so it is masked as one (docs/http-api.md).
    assert "Cannot open the database at postgresql://***@127.0.0.1:1/nowhere" in result.stderr


def test_cancel_workflow_through_the_cli() -> None:
    session_id = _create()
    nothing = runner.invoke(app, ["sessions", "cancel-workflow", session_id])
    assert nothing.exit_code == 1
    assert "no active workflow" in nothing.stderr
    start = '{"operation": "start_workflow", "workflowId": "guided_calculation"}'
    started = runner.invoke(
        app, ["tools", "call", "agent_workflow_run", start, "--session-id", session_id]
    )
    assert started.exit_code == 0, started.output

    cancelled = runner.invoke(app, ["sessions", "cancel-workflow", session_id, "--json"])

    assert cancelled.exit_code == 0, cancelled.output
    assert json.loads(cancelled.stdout) == {
        "sessionId": session_id,
        "cancelled": "guided_calculation",
    }
    shown = json.loads(runner.invoke(app, ["sessions", "show", session_id, "--json"]).stdout)
    assert shown["activeWorkflowId"] is None
    unknown = runner.invoke(app, ["sessions", "cancel-workflow", "nosuch"])
    assert unknown.exit_code == 1
    assert "Unknown session 'nosuch'" in unknown.stderr


def test_show_is_the_users_own_session_only() -> None:
    created = runner.invoke(app, ["sessions", "create", "--user", "bob", "--json"])
    bobs = json.loads(created.stdout)["sessionId"]
    refused = runner.invoke(app, ["sessions", "show", bobs])  # as user local, of the same org
    assert refused.exit_code == 1
    assert refused.stderr == f"error: Unknown session '{bobs}'.\n"
    shown = runner.invoke(app, ["sessions", "show", bobs, "--user", "bob", "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["user"] == "bob"


@pytest.mark.parametrize(
    ("command", "refused"),
    [
        (
            ["sessions", "create", "--title", "t" * 501],
            "--title is 501 characters long; the most is 500.",
        ),
        (["sessions", "create", "--org", ""], "--org is empty."),
        (["sessions", "create", "--user", "  "], "--user is empty."),
        (
            ["sessions", "create", "--user", "u" * 201],
            "--user is 201 characters long; the most is 200.",
        ),
        (["sessions", "list", "--org", ""], "--org is empty."),
        (["sessions", "show", "0" * 32, "--user", ""], "--user is empty."),
        (["tools", "call", "agent_list_modes", "--org", ""], "--org is empty."),
        (["workflows", "list", "--org", ""], "--org is empty."),
        (["sessions", "create", "--org", " acme"], "--org has spaces around it."),
    ],
    ids=[
        "title",
        "org",
        "user-blank",
        "user-long",
        "list-org",
        "show-user",
        "call-org",
        "wf-org",
        "org-spaced",
    ],
)
def test_names_and_titles_http_refuses_are_refused_here_too(
    command: list[str], refused: str
) -> None:
    result = runner.invoke(app, command)
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: {refused}\n"
    listed = runner.invoke(app, ["sessions", "list", "--json"])
    assert json.loads(listed.stdout) == []  # nothing was stored


def test_a_title_of_the_most_characters_is_kept() -> None:
    created = runner.invoke(app, ["sessions", "create", "--title", "t" * 500, "--json"])
    assert created.exit_code == 0, created.output
    assert json.loads(created.stdout)["title"] == "t" * 500


def test_list_offset_beyond_the_http_bound_is_a_usage_error_not_a_traceback() -> None:
    result = runner.invoke(app, ["sessions", "list", "--offset", str(2**63)])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--offset'" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    at_bound = runner.invoke(app, ["sessions", "list", "--offset", "1000000", "--json"])
    assert at_bound.exit_code == 0, at_bound.output
    assert json.loads(at_bound.stdout) == []
