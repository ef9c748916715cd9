"""An invalid setting is blamed on where its value came from: the variable or aptix.toml's key.

A bad key in the file's table was blamed on a variable set for the same setting, which could
not fix it (review s2, F2): the variable's table had been merged with the file's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.errors import ConfigurationError
from aptix.settings import load_settings
from tests.environment import own_settings

BAD_TIME_SERVER = '[mcp_servers.time]\ncommand = "uvx"\ntimeout = 5\n'
FILE_HINT = "fix the key in aptix.toml; docs/settings.md lists them all"


@pytest.fixture(autouse=True)
def _clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own_settings(monkeypatch, tmp_path)


def _refused() -> ConfigurationError:
    with pytest.raises(ConfigurationError) as raised:
        load_settings()
    return raised.value


def test_the_files_bad_key_under_a_variable_that_replaces_it_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "aptix.toml").write_text(BAD_TIME_SERVER)
    monkeypatch.setenv("APTIX_MCP_SERVERS", '{"x": {"command": "y"}}')
    result = CliRunner().invoke(app, ["config", "show"])
    assert result.exit_code == 0, result.output
    assert "mcp_servers = {'x': " in result.stdout


def test_a_variable_that_sets_nothing_leaves_the_blame_on_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # JSON null is no value to pydantic-settings: the file's table is the one read.
    (tmp_path / "aptix.toml").write_text(BAD_TIME_SERVER)
    monkeypatch.setenv("APTIX_MCP_SERVERS", "null")
    refused = _refused()
    assert str(refused) == (
        "Invalid settings: mcp_servers.time.timeout in aptix.toml: Extra inputs are not permitted."
    )
    assert refused.hint == FILE_HINT


def test_a_bad_value_in_the_variable_is_the_variables_beside_a_good_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "aptix.toml").write_text('[mcp_servers.time]\ncommand = "uvx"\n')
    monkeypatch.setenv("APTIX_MCP_SERVERS", '{"x": {"command": "y", "timeout": 5}}')
    refused = _refused()
    assert str(refused) == (
        "Invalid settings: APTIX_MCP_SERVERS (x.timeout): Extra inputs are not permitted."
    )
    assert refused.hint == "fix the variable; docs/settings.md lists them all"


def test_a_bad_variable_and_a_bad_file_key_are_each_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "aptix.toml").write_text(BAD_TIME_SERVER + '[llm_extra_headers]\nX-T = "t"\n')
    monkeypatch.setenv("APTIX_LLM_EXTRA_HEADERS", '{"X-Team": 1}')
    refused = _refused()
    assert str(refused) == (
        "Invalid settings: APTIX_LLM_EXTRA_HEADERS (X-Team): Input should be a valid string; "
        "mcp_servers.time.timeout in aptix.toml: Extra inputs are not permitted."
    )
    assert refused.hint == (
        "fix the variable and the key in aptix.toml; docs/settings.md lists them all"
    )
