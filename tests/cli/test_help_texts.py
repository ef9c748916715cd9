"""``--help`` says what each command and option does, as plain text.

Typer's boxed help showed ``<bool>`` beside every flag, as if it took a value; ``tools call``
promised a table it never prints; a docstring's reST markup showed as typed.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app

runner = CliRunner()

COMMANDS = [
    [],
    ["serve"],
    ["mcp"],
    ["chat"],
    ["tools", "list"],
    ["tools", "call"],
    ["sessions", "list"],
    ["workflows", "list"],
    ["workflows", "validate"],
    ["config", "show"],
    ["db", "upgrade"],
]


def _help(command: list[str]) -> str:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "aptix")
def test_help_shows_no_python_types_and_no_markup(command: list[str]) -> None:
    shown = _help(command)
    assert "<bool>" not in shown
    assert "list[" not in shown
    assert "``" not in shown


def test_the_root_help_lists_its_flags_without_a_value() -> None:
    lines = {line.split()[1]: line for line in _help([]).splitlines() if line.startswith("│ --")}
    assert set(lines) >= {"--version", "--help", "--install-completion", "--show-completion"}
    assert all("<" not in line for line in lines.values())


def test_tools_call_says_what_json_prints() -> None:
    shown = " ".join(_help(["tools", "call"]).split())
    assert "table" not in shown
    assert "{successful, result, errors} envelope" in shown
    assert "print its result as JSON" in shown


def test_serve_names_what_tools_takes() -> None:
    assert "--tools <file>" in " ".join(_help(["serve"]).split()).replace("│", "")
