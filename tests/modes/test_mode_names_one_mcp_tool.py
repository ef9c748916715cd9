"""A mode may name one MCP tool, ``<prefix>_<tool>``, beside ``<prefix>_*`` (docs/mcp-servers.md).

``aptix serve`` checks the configuration without starting the servers, and a server may be
down: until the server lists its tools, a name under its prefix is taken to be its own. Once
it has listed them, a name it does not have is refused, as any unknown tool is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aptix.cli.runtime import check_runtime
from aptix.errors import ConfigurationError
from aptix.modes.catalog import check_mode_tools, load_mode_catalog
from aptix.runtime import BUILTIN_TOOLS, open_runtime
from aptix.settings import AptixSettings
from tests.tools.mcp_servers import time_server
from tests.tools.modes import modes_offering

DOWN = {"command": sys.executable, "args": ["-c", "raise SystemExit(1)"]}


def _settings(tmp_path: Path, server: dict[str, Any], tool: str) -> AptixSettings:
    return AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        mcp_servers={"time": server},
        modes_path=modes_offering(tmp_path, tool),
    )


def test_serve_accepts_a_mode_naming_one_tool_of_a_server_it_has_not_started(
    tmp_path: Path,
) -> None:
    check_runtime(_settings(tmp_path, time_server(), "time_get_current_time"))


async def test_the_started_server_offers_the_tool_the_mode_names(tmp_path: Path) -> None:
    settings = _settings(tmp_path, time_server(), "time_get_current_time")
    async with open_runtime(settings) as runtime:
        assert "time_get_current_time" in runtime.registry.registered_tools
        offered = runtime.services.modes.tools_for_mode("general")
        assert "time_get_current_time" in offered
        assert "time_convert_time" not in offered  # one tool, not the whole server


async def test_a_tool_the_started_server_does_not_list_is_refused(tmp_path: Path) -> None:
    settings = _settings(tmp_path, time_server(), "time_no_such_tool")
    with pytest.raises(ConfigurationError, match=r"unknown tool\(s\) time_no_such_tool") as info:
        async with open_runtime(settings):
            pass
    assert info.value.hint is not None
    assert "the MCP server of time_* does not list it" in info.value.hint


async def test_a_server_that_is_down_lends_its_prefix_to_single_names(tmp_path: Path) -> None:
    async with open_runtime(_settings(tmp_path, DOWN, "time_get_current_time")) as runtime:
        assert "time_get_current_time" in runtime.services.modes.tools_for_mode("general")


def test_only_a_configured_server_lends_names(tmp_path: Path) -> None:
    catalog = load_mode_catalog(modes_offering(tmp_path, "time_get_current_time"))
    builtins = [t.TOOL_NAME for t in BUILTIN_TOOLS]
    check_mode_tools(catalog, [*builtins, "time_*"])
    with pytest.raises(ConfigurationError, match=r"unknown tool\(s\) time_get_current_time \("):
        check_mode_tools(catalog, builtins)  # no server has the prefix time
    with pytest.raises(ConfigurationError, match=r"unknown tool\(s\) time_get_current_time \("):
        check_mode_tools(catalog, [*builtins, "time_*", "time_convert_time"])  # it listed its own
    other = load_mode_catalog(modes_offering(tmp_path, "agent_x"))
    with pytest.raises(ConfigurationError, match=r"unknown tool\(s\) agent_x \("):
        check_mode_tools(other, [*builtins, "time_*"])  # a prefix lends its own names only


def test_serve_refuses_a_tool_the_started_server_lacks_in_one_line(tmp_path: Path) -> None:
    environment = {
        **os.environ,
        "APTIX_DATA_DIR": str(tmp_path / "data"),
        "APTIX_LOAD_PLUGINS": "false",
        "APTIX_MCP_SERVERS": json.dumps({"time": time_server()}),
        "APTIX_MODES_PATH": str(modes_offering(tmp_path, "time_no_such_tool")),
    }
    environment.pop("APTIX_DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "aptix", "serve", "--port", "0"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    [line] = [x for x in done.stderr.splitlines() if "unknown tool(s) time_no_such_tool" in x]
    assert "error: " in line
