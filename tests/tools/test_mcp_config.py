"""The ``mcp_servers`` setting: TOML tables, JSON in APTIX_MCP_SERVERS, defaults and refusals."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from aptix.settings import AptixSettings
from aptix.settings_mcp import McpServerConfig, local_tool_name, tool_prefix
from aptix.testing import RecordingLogger
from aptix.tools.mcp_source.source import McpToolSource

TOML = """
[mcp_servers.time]
command = "mcp-server-time"
args = ["--local-timezone", "UTC"]
approval = "never"

[mcp_servers."docs.site"]
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer x" }
timeout_seconds = 5

[mcp_servers.off]
command = "never-started"
enabled = false
"""


def test_toml_tables_configure_servers_with_the_documented_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "aptix.toml"
    config.write_text(TOML, encoding="utf-8")
    monkeypatch.setenv("APTIX_CONFIG_FILE", str(config))
    monkeypatch.delenv("APTIX_MCP_SERVERS", raising=False)
    servers = AptixSettings(data_dir=tmp_path).mcp_servers
    assert set(servers) == {"time", "docs.site", "off"}
    time, docs = servers["time"], servers["docs.site"]
    assert (time.transport, time.args, time.approval) == (
        "stdio",
        ["--local-timezone", "UTC"],
        "never",
    )
    assert (docs.transport, docs.headers, docs.timeout_seconds) == (
        "http",
        {"Authorization": "Bearer x"},
        5,
    )
    assert docs.approval == "destructive"  # the default policy
    assert time.timeout_seconds == 30
    assert time.enabled
    # The prefix defaults to the name, with characters outside the pattern replaced.
    assert tool_prefix("docs.site", docs) == "docs_site"
    assert local_tool_name("docs_site", "search/all") == "docs_site_search_all"
    # A disabled server is left out: no connection, no `off_*` pattern.
    source = McpToolSource(servers, RecordingLogger())
    assert set(source.connections) == {"time", "docs.site"}
    assert source.patterns == ("time_*", "docs_site_*")


def test_the_environment_variable_takes_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "APTIX_MCP_SERVERS",
        json.dumps({"git": {"command": "mcp-server-git", "prefix": "repo", "approval": "always"}}),
    )
    [(name, git)] = AptixSettings(data_dir=tmp_path).mcp_servers.items()
    assert (name, tool_prefix(name, git), git.approval) == ("git", "repo", "always")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"command": "a", "url": "http://x/mcp"}, "or 'url' (streamable HTTP), not both"),
        ({}, "give 'command' (a stdio server) or 'url' (a streamable HTTP server)"),
        ({"url": "ftp://x/mcp"}, "must start with http:// or https://"),
        ({"command": "a", "approval": "sometimes"}, "'never', 'destructive' or 'always'"),
        ({"command": "a", "timeout_seconds": 0}, "greater than 0"),
        ({"command": "a", "comand": "typo"}, "Extra inputs are not permitted"),
    ],
)
def test_malformed_entries_are_refused_saying_why(entry: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        McpServerConfig.model_validate(entry)
