"""``aptix chat --mode`` is for a new session: with a continued one it is refused, not ignored.

An empty ``--session-id`` names no session: it is refused too, not read as "a new one".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app

runner = CliRunner()


@pytest.mark.parametrize("continued", [["--session-id", "a" * 32], ["--continue"], ["-c"]])
def test_mode_with_a_continued_session_is_refused(
    continued: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("APTIX_LLM_MODEL", "demo")
    result = runner.invoke(app, ["chat", *continued, "--mode", "calculation"], input="")
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "error: --mode chooses the mode of a new session, not of a continued one; switch a "
        "continued session's mode with /mode KEY in the chat.\n"
    )
    assert not (tmp_path / "aptix.db").exists()  # refused before anything was opened


@pytest.mark.parametrize("mode", [[], ["--mode", "calculation"]])
def test_an_empty_session_id_is_refused_not_taken_for_a_new_session(
    mode: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "--session-id $SID" with SID unset started a new session, silently.
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("APTIX_LLM_MODEL", "demo")
    result = runner.invoke(app, ["chat", "--session-id", "", *mode], input="")
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "error: --session-id is empty; give a session's id (aptix sessions list shows them), "
        "or leave the option out to start a new session.\n"
    )
    assert not (tmp_path / "aptix.db").exists()  # refused before anything was opened
