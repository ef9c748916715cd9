"""A JSON setting nested too deeply to read ends the command with one line, not a traceback.

``json.loads`` raises ``RecursionError``, which neither pydantic nor the settings sources
turn into an error, so every command ended with a traceback and exit 1 (review r2, F2).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app
from tests.environment import own_settings

DEEP_LIST = "[" * 20_000
DEEP_OBJECT = '{"a":' * 20_000
HINT = "fix the variable; docs/settings.md lists them all"


@pytest.fixture(autouse=True)
def _clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own_settings(monkeypatch, tmp_path)
    monkeypatch.setenv("APTIX_SEMANTIC_MATCHING", "false")


@pytest.mark.parametrize(
    ("variable", "value", "why"),
    [
        ("APTIX_TOOL_MODULES", DEEP_LIST, "Value error, nests too deeply for Aptix to read"),
        ("APTIX_MCP_SERVERS", DEEP_OBJECT, "nests too deeply for Aptix to read"),
        ("APTIX_LLM_EXTRA_HEADERS", DEEP_OBJECT, "nests too deeply for Aptix to read"),
    ],
)
@pytest.mark.parametrize("command", [["config", "show"], ["tools", "list"]])
def test_a_deeply_nested_variable_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, why: str, command: list[str]
) -> None:
    monkeypatch.setenv(variable, value)
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: Invalid settings: {variable}: {why}. — {HINT}\n"
    assert result.stdout == ""


def test_a_deeply_nested_list_in_the_settings_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "aptix.toml").write_text(f"tool_modules = '{DEEP_LIST}'\n")
    result = CliRunner().invoke(app, ["config", "show"])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "error: Invalid settings: tool_modules in aptix.toml: Value error, nests too deeply for "
        "Aptix to read. — fix the key in aptix.toml; docs/settings.md lists them all\n"
    )
