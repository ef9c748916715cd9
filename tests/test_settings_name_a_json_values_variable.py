"""A bad value inside a JSON setting names the variable the user set and the path inside it.

Each part of the place was joined into one name (``APTIX_MCP_SERVERS_TIME_TIMEOUT``), a
variable that does not exist and would be ignored if set (review r2, F3).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.errors import ConfigurationError
from aptix.settings import load_settings
from tests.environment import own_settings


@pytest.fixture(autouse=True)
def _clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own_settings(monkeypatch, tmp_path)


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        (
            "APTIX_MCP_SERVERS",
            '{"time": {"command": "mcp-server-time", "timeout": 5}}',
            "APTIX_MCP_SERVERS (time.timeout): Extra inputs are not permitted",
        ),
        (
            "APTIX_MCP_SERVERS",
            '{"time": {"command": "mcp-server-time", "args": ["--tz", 1]}}',
            "APTIX_MCP_SERVERS (time.args.1): Input should be a valid string",
        ),
        (
            "APTIX_LLM_EXTRA_HEADERS",
            '{"X-Team": 1}',
            "APTIX_LLM_EXTRA_HEADERS (X-Team): Input should be a valid string",
        ),
    ],
)
def test_a_bad_value_inside_a_json_setting_names_its_variable_and_path(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, said: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationError) as raised:
        load_settings()
    assert str(raised.value) == f"Invalid settings: {said}."
    assert raised.value.hint == "fix the variable; docs/settings.md lists them all"


def test_the_command_line_names_the_variable_and_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_LLM_EXTRA_HEADERS", '{"X-Team": 1}')
    result = CliRunner().invoke(app, ["config", "show"])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "error: Invalid settings: APTIX_LLM_EXTRA_HEADERS (X-Team): Input should be a valid "
        "string. — fix the variable; docs/settings.md lists them all\n"
    )


def test_a_whole_variable_is_named_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_LLM_EXTRA_HEADERS", '{"bad header": "x"}')
    with pytest.raises(ConfigurationError) as raised:
        load_settings()
    assert str(raised.value).startswith("Invalid settings: APTIX_LLM_EXTRA_HEADERS: Value error, ")


def test_the_settings_file_still_names_the_key_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "aptix.toml").write_text(
        '[mcp_servers.time]\ncommand = "mcp-server-time"\ntimeout = 5\n'
    )
    with pytest.raises(ConfigurationError) as raised:
        load_settings()
    assert str(raised.value) == (
        "Invalid settings: mcp_servers.time.timeout in aptix.toml: Extra inputs are not permitted."
    )
