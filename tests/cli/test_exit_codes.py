"""Exit code 2 for typed input that is refused, 1 for what a command found; the source named.

``tools call`` exited 1 (a failed call) for ARGUMENTS it refused before calling anything,
and ``workflows validate`` exited 1 (the catalog has problems) for a PATH that does not
exist; a bad value in the settings file named the variable, not the file's key.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith("APTIX_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("APTIX_SEMANTIC_MATCHING", "false")


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ('{"expression": "caf\udce9"}', "The byte 0xe9 is not valid UTF-8"),
        ('{"expression": "1\\u0000"}', "NUL characters"),
        ('{"expression": "\\ud800"}', "Lone surrogate characters"),
    ],
    ids=["not-utf8", "nul", "lone-surrogate"],
)
def test_tools_call_refuses_unstorable_arguments_with_exit_code_2(
    arguments: str, said: str
) -> None:
    result = runner.invoke(app, ["tools", "call", "agent_calculator", arguments])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {said}"), result.stderr


def test_workflows_validate_of_a_missing_path_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["workflows", "validate", str(tmp_path / "nope")])
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: {tmp_path / 'nope'} does not exist.\n"


def test_a_missing_path_with_a_byte_that_is_not_utf8_names_the_byte(tmp_path: Path) -> None:
    result = runner.invoke(app, ["workflows", "validate", f"{tmp_path}/caf\udce9"])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "error: The byte 0xe9 is not valid UTF-8; text must be UTF-8 (found in PATH).\n"
    )


def test_workflows_validate_still_exits_1_for_problems(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("workflowId: [\n")
    result = runner.invoke(app, ["workflows", "validate", str(tmp_path / "bad.yaml")])
    assert result.exit_code == 1, result.output


@pytest.mark.parametrize("named", [True, False], ids=["APTIX_CONFIG_FILE", "aptix.toml"])
def test_a_bad_value_in_the_settings_file_names_the_file_and_its_key(
    named: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "c9.toml" if named else "aptix.toml"
    (tmp_path / name).write_text('port = "x"\n')
    if named:
        monkeypatch.setenv("APTIX_CONFIG_FILE", name)
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert line.startswith(f"error: Invalid settings: port in {name}: Input should be"), line
    assert line.endswith(f"— fix the key in {name}; docs/settings.md lists them all"), line
    assert "APTIX_PORT" not in line


def test_a_bad_variable_is_named_as_the_variable_whatever_the_file_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "aptix.toml").write_text("port = 8001\n")
    monkeypatch.setenv("APTIX_PORT", "eighty")
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert line.startswith("error: Invalid settings: APTIX_PORT: Input should be"), line
    assert line.endswith("— fix the variable; docs/settings.md lists them all"), line
