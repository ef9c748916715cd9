"""docs/mcp-servers.md's first example, run as written: pip's mcp-server-time, one TOML table."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from aptix.runtime import open_runtime
from aptix.settings import load_settings
from aptix.testing import ScriptedModel, call, reply

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp-servers.md"


def _first_block(language: str) -> str:
    found = re.search(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert found, f"no {language} block in {DOC.name}"
    return found.group(1)


async def test_the_first_example_offers_the_time_tool_in_the_default_mode_and_a_turn_uses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _first_block("sh").strip() == "pip install mcp-server-time"
    # What `pip install` in the active environment gives: the script on PATH.
    bin_dir = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    (tmp_path / "aptix.toml").write_text(_first_block("toml"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("APTIX_LOAD_PLUGINS", "false")
    monkeypatch.setenv("APTIX_SEMANTIC_MATCHING", "false")
    model = ScriptedModel.of(
        reply(None, call("time_get_current_time", {"timezone": "Asia/Tokyo"})),
        reply("It is evening in Tokyo."),
    )
    async with open_runtime(load_settings()) as runtime:
        created = await runtime.services.sessions.create_session(org="local", user="local")
        assert created.result is not None
        assert created.result.mode == "general"
        reasoner = runtime.reasoner(model)
        prepared = await reasoner.prepare(
            session_id=created.result.id,
            org="local",
            user="local",
            instruction="What time is it in Tokyo?",
        )
        result = await reasoner.run(prepared)
    assert "time_get_current_time" in model.offered_tools(0)
    assert result.kind == "ok", result
    (used,) = result.tool_calls
    assert used["wasExecuted"], used
    assert json.loads(used["resultJson"])["structuredContent"]["timezone"] == "Asia/Tokyo"
    model.assert_complete()


async def test_modes_name_where_a_server_s_tools_are_offered(tmp_path: Path) -> None:
    from aptix.errors import ConfigurationError
    from aptix.settings import AptixSettings
    from tests.tools.mcp_servers import time_server

    def settings(**servers: dict[str, object]) -> AptixSettings:
        return AptixSettings(
            data_dir=tmp_path, load_plugins=False, semantic_matching=False, mcp_servers=servers
        )

    chosen = settings(time=time_server(modes=["calculation"]), clock=time_server(modes=[]))
    async with open_runtime(chosen) as runtime:
        modes = runtime.services.modes
        assert "time_*" in modes.tools_for_mode("calculation")
        assert "time_*" not in modes.tools_for_mode("general")
        assert not any(t.startswith("clock_") for m in modes.keys for t in modes.tools_for_mode(m))
    with pytest.raises(ConfigurationError, match=r"MCP server 'time' .* unknown mode\(s\) nope"):
        async with open_runtime(settings(time=time_server(modes=["nope"]))):
            pass
