"""``aptix chat --mode`` is for a new session: with a continued one it is refused, not ignored."""

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
