from __future__ import annotations

import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from aptix import AgentToolRegistry, PluginLoadError
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import RecordingLogger
from aptix.tools.builtin.calculator import CalculatorTool
from aptix.tools.plugins import ENTRY_POINT_GROUP, register_plugins

GOOD_PLUGIN = """
from typing import Any
from pydantic import Field
from aptix import AgentTool, InvokeResult, ToolArgs, function_schema

class _Args(ToolArgs):
    text: str = Field("", description="Text to shout.")

class ShoutTool(AgentTool):
    TOOL_NAME = "acme_shout"
    TOOL_USAGE_METADATA = "Call to shout text back in capitals."

    def __init__(self, logger: Any) -> None:
        self.logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        return function_schema(cls.TOOL_NAME, "Shouts text.", _Args)

    async def execute(self, arguments_json: str, context: Any) -> InvokeResult[str]:
        return InvokeResult.create('"' + arguments_json.upper() + '"')

class NamelessTool(ShoutTool):
    TOOL_NAME = "bad name"
"""


@pytest.fixture
def plugin_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "acme_tools.py").write_text(textwrap.dedent(GOOD_PLUGIN))
    info = tmp_path / "acme_tools-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-tools\nVersion: 1.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return info


def test_entry_point_tools_are_discovered_and_registered(plugin_dist: Path) -> None:
    (plugin_dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nshout = acme_tools:ShoutTool\n"
    )
    registry = AgentToolRegistry(RecordingLogger())
    assert register_plugins(registry) == ["acme_shout"]
    assert registry.registered_tools == ("acme_shout",)


async def test_the_runtime_loads_plugins_at_start_up(
    plugin_dist: Path, settings: AptixSettings
) -> None:
    (plugin_dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nshout = acme_tools:ShoutTool\n"
    )
    async with open_runtime(settings.model_copy(update={"load_plugins": True})) as runtime:
        assert "acme_shout" in runtime.registry.registered_tools


def test_malformed_plugin_stops_start_up_naming_the_plugin(plugin_dist: Path) -> None:
    (plugin_dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nnameless = acme_tools:NamelessTool\n"
    )
    logger = RecordingLogger()
    with pytest.raises(PluginLoadError, match=r"Plugin 'nameless' \(acme_tools:NamelessTool\)"):
        register_plugins(AgentToolRegistry(logger))
    assert len(logger.errors) == 1


def test_plugin_that_fails_to_import_names_the_plugin() -> None:
    registry = AgentToolRegistry(RecordingLogger())
    broken = EntryPoint("ghost", "no_such_module_xyz:Tool", ENTRY_POINT_GROUP)
    with pytest.raises(PluginLoadError, match="Could not load plugin 'ghost'"):
        register_plugins(registry, [broken])
    assert registry.registered_tools == ()


class OtherCalculator(CalculatorTool):
    """A plugin's own class with the built-in calculator's name (the same class is no clash)."""


def test_plugin_clashing_with_a_builtin_is_refused() -> None:
    registry = AgentToolRegistry(RecordingLogger())
    registry.register(CalculatorTool)
    clash = EntryPoint("calc", f"{__name__}:OtherCalculator", ENTRY_POINT_GROUP)
    with pytest.raises(PluginLoadError, match="already registered"):
        register_plugins(registry, [clash])
