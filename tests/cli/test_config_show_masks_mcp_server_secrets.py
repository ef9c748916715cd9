"""``aptix config show`` masks an MCP server's credentials as it masks the model endpoint's.

An HTTP server's ``headers`` (``Authorization: Bearer ...``, as docs/mcp-servers.md shows),
its URL's password and query values, and a stdio server's ``env`` are secrets; the rest of
each entry is shown as it is, so that it can be checked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app
from tests.environment import own_settings

runner = CliRunner()

SECRETS = ("URLPASSWORD", "QUERYTOKEN", "HEADERSECRET", "ENVSECRET", "ARGPASSWORD")
SERVERS = {
    "docs": {
        "url": "https://kbuser:URLPASSWORD@mcp.example.com/mcp?token=QUERYTOKEN",
        "headers": {"Authorization": "Bearer HEADERSECRET"},
        "prefix": "kb",
    },
    "git": {
        "command": "mcp-server-git",
        "args": ["--repository", "/srv/repo", "--remote", "https://bot:ARGPASSWORD@git.example"],
        "env": {"GITHUB_TOKEN": "ENVSECRET"},
    },
}


@pytest.fixture(autouse=True)
def _clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own_settings(monkeypatch, tmp_path, tmp_path / "data")
    monkeypatch.setenv("APTIX_MCP_SERVERS", json.dumps(SERVERS))


def test_config_show_json_masks_mcp_headers_env_and_url_credentials() -> None:
    result = runner.invoke(app, ["config", "show", "--json"])
    assert result.exit_code == 0, result.output
    for secret in SECRETS:
        assert secret not in result.stdout
    shown = json.loads(result.stdout)["mcp_servers"]
    assert shown["docs"]["url"] == "https://***@mcp.example.com/mcp?token=***"
    assert shown["docs"]["headers"] == {"Authorization": "********"}
    assert shown["docs"]["prefix"] == "kb"  # what is not a secret stays, to be checked
    assert shown["git"]["env"] == {"GITHUB_TOKEN": "********"}
    assert shown["git"]["command"] == "mcp-server-git"
    assert shown["git"]["args"] == [
        "--repository",
        "/srv/repo",
        "--remote",
        "https://***@git.example",
    ]


def test_config_show_text_masks_mcp_headers_env_and_url_credentials() -> None:
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 0, result.output
    [line] = [ln for ln in result.stdout.splitlines() if ln.startswith("mcp_servers = ")]
    for secret in SECRETS:
        assert secret not in result.stdout
    assert "'Authorization': '********'" in line
    assert "'GITHUB_TOKEN': '********'" in line


def test_config_show_keeps_a_stdio_server_without_env_as_it_is() -> None:
    result = runner.invoke(
        app,
        ["config", "show", "--json"],
        env={"APTIX_MCP_SERVERS": json.dumps({"time": {"command": "mcp-server-time"}})},
    )
    assert result.exit_code == 0, result.output
    time = json.loads(result.stdout)["mcp_servers"]["time"]
    assert time["command"] == "mcp-server-time"
    assert time["env"] is None
    assert time["headers"] == {}
