"""One tool class reached by two routes (a plugin and ``APTIX_TOOL_MODULES``) is registered once.

Two different classes with one name are still refused; when they are one file imported twice
(by its path and by its module name) the refusal says so (review r6, F3).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from aptix import AgentToolRegistry, PluginLoadError, ToolContractError
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import RecordingLogger
from aptix.tools.builtin.calculator import CalculatorTool
from aptix.tools.plugins import ENTRY_POINT_GROUP

MODULE = "r6_twice_tools"

TOOL = '''
import aptix


@aptix.tool(usage="Call to echo text.")
async def echo_twice(text: str) -> str:
    """Echoes the text.

    Args:
        text: The text.
    """
    return text
'''


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An installed distribution whose ``aptix.tools`` entry point names ``echo_twice``."""
    (tmp_path / f"{MODULE}.py").write_text(TOOL)
    info = tmp_path / "r6_twice-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: r6-twice\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\necho = {MODULE}:echo_twice\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path / f"{MODULE}.py"
    sys.modules.pop(MODULE, None)


async def test_a_plugin_also_named_in_tool_modules_starts_with_the_tool_once(
    package: Path, tmp_path: Path
) -> None:
    settings = AptixSettings(data_dir=tmp_path, tool_modules=[MODULE], load_plugins=True)
    async with open_runtime(settings) as runtime:
        assert runtime.registry.registered_tools.count("echo_twice") == 1


def test_the_same_class_registered_twice_keeps_its_first_factory() -> None:
    registry = AgentToolRegistry(RecordingLogger())
    first = CalculatorTool(RecordingLogger())
    registry.register(CalculatorTool, lambda: first)
    registry.register(CalculatorTool)
    assert registry.registered_tools == ("agent_calculator",)
    assert registry.get_tool("agent_calculator") is first


def test_another_class_with_the_name_is_still_refused() -> None:
    class OtherCalculator(CalculatorTool):
        """Another class that takes the calculator's name."""

    registry = AgentToolRegistry(RecordingLogger())
    registry.register(CalculatorTool)
    with pytest.raises(ToolContractError, match="already registered as 'agent_calculator'"):
        registry.register(OtherCalculator)


async def test_the_plugin_file_named_by_its_path_is_refused_saying_it_is_imported_twice(
    package: Path, tmp_path: Path
) -> None:
    settings = AptixSettings(data_dir=tmp_path, tool_modules=[str(package)], load_plugins=True)
    with pytest.raises(PluginLoadError) as raised:
        async with open_runtime(settings):
            pass
    assert str(raised.value) == (
        f"Tool EchoTwiceTool in {package} breaks the tool contract: Tool 'echo_twice' is "
        f"already registered as 'echo_twice' by {MODULE}.EchoTwiceTool (names are compared "
        f"case-insensitively); both come from {package}, imported twice: name it by its "
        f"module, {MODULE}, or leave it out of APTIX_TOOL_MODULES if a plugin loads it."
    )
