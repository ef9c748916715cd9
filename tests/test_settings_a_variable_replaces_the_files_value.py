"""A setting given by a variable replaces aptix.toml's value of it whole, tables included.

pydantic-settings merged a variable's JSON object into the file's table key by key, so
``APTIX_MCP_SERVERS='{}'`` left the file's servers on and a server named in both took the
file's ``args`` beside the variable's ``command`` (review s2, F3). docs/settings.md lists the
variables before the file in order of precedence.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aptix.settings import load_settings
from tests.environment import own_settings

TIME_SERVER = (
    '[mcp_servers.time]\ncommand = "uvx"\nargs = ["mcp-server-time"]\nenv = {TZ = "UTC"}\n'
)


@pytest.fixture(autouse=True)
def _clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own_settings(monkeypatch, tmp_path)


def test_an_empty_object_turns_the_files_mcp_servers_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "aptix.toml").write_text(TIME_SERVER)
    assert list(load_settings().mcp_servers) == ["time"]
    monkeypatch.setenv("APTIX_MCP_SERVERS", "{}")
    assert load_settings().mcp_servers == {}


def test_the_variables_servers_are_the_only_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "aptix.toml").write_text(TIME_SERVER)
    monkeypatch.setenv("APTIX_MCP_SERVERS", '{"x": {"command": "y"}}')
    assert list(load_settings().mcp_servers) == ["x"]


def test_a_server_in_both_takes_nothing_from_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "aptix.toml").write_text(TIME_SERVER)
    monkeypatch.setenv("APTIX_MCP_SERVERS", '{"time": {"command": "other-time"}}')
    time = load_settings().mcp_servers["time"]
    assert (time.command, time.args, time.env) == ("other-time", [], None)


def test_the_variables_headers_replace_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "aptix.toml").write_text('[llm_extra_headers]\nX-From-Toml = "t"\n')
    monkeypatch.setenv("APTIX_LLM_EXTRA_HEADERS", '{"X-Env": "e"}')
    assert load_settings().llm_extra_headers == {"X-Env": "e"}
    monkeypatch.setenv("APTIX_LLM_EXTRA_HEADERS", "{}")
    assert load_settings().llm_extra_headers == {}


def test_a_lower_case_variable_replaces_the_files_value_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "aptix.toml").write_text(TIME_SERVER)
    monkeypatch.setenv("aptix_mcp_servers", "{}")
    assert load_settings().mcp_servers == {}


def test_the_variables_tool_modules_replace_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "aptix.toml").write_text('tool_modules = ["from_file.py"]\nport = 9001\n')
    monkeypatch.setenv("APTIX_TOOL_MODULES", "from_env.py")
    settings = load_settings()
    assert settings.tool_modules == ["from_env.py"]
    assert settings.port == 9001  # what no variable sets is still the file's


def test_a_bad_value_the_variable_replaces_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "aptix.toml").write_text('[mcp_servers.time]\ncommand = "uvx"\ntimeout = 5\n')
    monkeypatch.setenv("APTIX_MCP_SERVERS", '{"x": {"command": "y"}}')
    assert list(load_settings().mcp_servers) == ["x"]
