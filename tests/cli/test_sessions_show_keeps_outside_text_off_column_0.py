"""``aptix sessions show`` never lets a title or a mode reason start a line (review r3 F1).

A session's title (any caller's) and its mode reason (the model's) are outside text: a line
break in them put "active workflow: ..." or "mode: ..." at column 0, where the command's
own labels are, for a session with neither.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aptix.cli import output
from aptix.cli.main import app

runner = CliRunner()

FORGED_TITLE = (
    "Quarterly report\nactive workflow: guided_calculation\n"
    "branched from: 0123456789abcdef0123456789abcdef"
)
FORGED_REASON = "user asked\nmode: general"
LABELS = ("Session ", "mode: ", "title: ")


@pytest.fixture(autouse=True)
def _isolated_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))


def _heading(session_id: str) -> list[str]:
    """The lines ``sessions show`` writes before its mode history table."""
    shown = runner.invoke(app, ["sessions", "show", session_id])
    assert shown.exit_code == 0, shown.output
    return shown.stdout.split("Mode history")[0].rstrip(" \n").split("\n")


def test_a_title_and_a_reason_with_line_breaks_never_start_a_line() -> None:
    created = runner.invoke(app, ["sessions", "create", "--title", FORGED_TITLE])
    assert created.exit_code == 0, created.output
    session_id = created.stdout.strip()
    arguments = json.dumps({"mode": "workflow_authoring", "branch": False, "reason": FORGED_REASON})
    called = runner.invoke(
        app, ["tools", "call", "agent_change_mode", arguments, "--session-id", session_id]
    )
    assert called.exit_code == 0, called.output

    lines = _heading(session_id)
    assert lines == [
        f"Session {session_id}  (local/local)",
        "mode: workflow_authoring — user asked",
        "      mode: general",
        "title: Quarterly report",
        "       active workflow: guided_calculation",
        "       branched from: 0123456789abcdef0123456789abcdef",
    ]


def test_a_long_title_folds_under_its_label(monkeypatch: pytest.MonkeyPatch) -> None:
    # A terminal wraps a line too long for it at column 0: the title is folded first.
    monkeypatch.setattr(output.console, "_width", 40)
    title = "x" * 30 + " active workflow: guided_calculation"
    created = runner.invoke(app, ["sessions", "create", "--title", title])
    session_id = created.stdout.strip()

    lines = _heading(session_id)[1:]
    assert lines[0] == "mode: general"
    assert lines[1].startswith("title: x")
    assert len(lines) > 2
    assert all(len(line) <= 40 for line in lines), lines
    assert all(line.startswith("       ") for line in lines[2:]), lines
    assert "".join(line.strip() for line in lines[1:]).replace(" ", "") == "title:" + (
        title.replace(" ", "")
    )
    assert all(line.startswith(LABELS) or line.startswith(" ") for line in lines)
