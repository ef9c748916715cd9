"""A tool file is loaded once however often it is named, and any failure is one line naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aptix.errors import PluginLoadError
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings

TOOL = '''
import aptix

@aptix.tool(usage="Echoes.")
async def echo_once(text: str) -> str:
    """Echoes the text.

    Args:
        text: The text.
    """
    return text
'''


def _settings(tmp_path: Path, *modules: str) -> AptixSettings:
    return AptixSettings(data_dir=tmp_path, tool_modules=list(modules), load_plugins=False)


async def test_the_same_file_named_twice_is_loaded_and_registered_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "echo_tools.py"
    path.write_text(TOOL)
    monkeypatch.chdir(tmp_path)
    async with open_runtime(_settings(tmp_path, str(path), "./echo_tools.py")) as runtime:
        assert runtime.registry.registered_tools.count("echo_once") == 1


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("import sys\nsys.exit('bye from module')\n", "SystemExit: bye from module"),
        ("raise KeyboardInterrupt\n", "KeyboardInterrupt"),
        ("raise BaseException('base!')\n", "BaseException: base!"),
    ],
)
async def test_a_file_exiting_at_import_stops_start_up_naming_the_file(
    tmp_path: Path, source: str, why: str
) -> None:
    path = tmp_path / "exits.py"
    path.write_text(source)
    with pytest.raises(PluginLoadError) as raised:
        async with open_runtime(_settings(tmp_path, str(path))):
            pass
    assert str(raised.value) == f"Could not load tool file {path}: {why}"


def _cli(tmp_path: Path, path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "APTIX_DATA_DIR": str(tmp_path), "APTIX_TOOL_MODULES": str(path)}
    command = [str(Path(sys.executable).parent / "aptix"), "tools", "list"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


NO_USAGE = """
from typing import Any
from aptix import AgentTool, InvokeResult

class NoUsage(AgentTool):
    TOOL_NAME = "no_usage"

    @classmethod
    def schema(cls) -> dict[str, Any]:
        parameters = {"type": "object", "properties": {}, "required": []}
        return {
            "type": "function", "name": "no_usage", "description": "N.", "parameters": parameters
        }

    async def execute(self, arguments_json, context):
        return InvokeResult.create("{}")
"""

BAD_INIT = NO_USAGE.replace(
    'TOOL_NAME = "no_usage"',
    """TOOL_NAME = "no_usage"
    TOOL_USAGE_METADATA = "U."

    def __init__(self, logger: Any, extra: int) -> None:
        pass""",
)


def test_the_cli_says_a_refused_tool_once_naming_the_file_and_class(tmp_path: Path) -> None:
    path = tmp_path / "a_nousage.py"
    path.write_text(NO_USAGE)
    done = _cli(tmp_path, path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: Tool NoUsage in {path} breaks the tool contract: Tool 'no_usage' does not "
        "declare TOOL_USAGE_METADATA."
    ]


def test_the_cli_says_a_tool_that_cannot_be_built_once_naming_the_file_and_class(
    tmp_path: Path,
) -> None:
    path = tmp_path / "l_badinit.py"
    path.write_text(BAD_INIT)
    done = _cli(tmp_path, path)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error: Tool NoUsage in {path} could not be built: TypeError: ")
