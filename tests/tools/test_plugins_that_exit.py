"""A plugin or tool that calls ``sys.exit()`` (or raises ``KeyboardInterrupt``) stops start-up
with one line naming it, never a silent exit with its own code (review r6, F5).

Only a Ctrl-C the process really received while that code ran is let through as itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from aptix import AgentToolRegistry, PluginLoadError, ToolContractError
from aptix.testing import RecordingLogger
from aptix.tools.modules import load_tool_modules, register_tool_modules
from aptix.tools.plugins import ENTRY_POINT_GROUP, register_plugins

TOOL = """
import os
import signal
import sys
from typing import Any

from aptix import AgentTool, InvokeResult

HOW = os.environ.get("R6_EXIT_HOW", "")
if HOW == "import":
    sys.exit(9)


class ExitTool(AgentTool):
    TOOL_NAME = "exit_tool"
    TOOL_USAGE_METADATA = "Never offered."

    def __init__(self, logger: Any) -> None:
        if HOW == "constructor":
            sys.exit()
        if HOW == "constructor0":
            sys.exit(0)

    @classmethod
    def schema(cls) -> dict[str, Any]:
        if HOW == "schema":
            sys.exit(3)
        parameters = {"type": "object", "properties": {}, "required": []}
        return {"type": "function", "name": cls.TOOL_NAME, "description": "E.",
                "parameters": parameters}

    async def execute(self, arguments_json: str, context: Any) -> InvokeResult[str]:
        return InvokeResult.create("{}")


def exit_factory() -> ExitTool:
    raise SystemExit(7)


def interrupt_factory() -> ExitTool:
    raise KeyboardInterrupt


def ctrl_c_factory() -> ExitTool:
    signal.raise_signal(signal.SIGINT)  # a real Ctrl-C, arriving while the factory runs
    return ExitTool(None)
"""


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = "r6_exit_tools"
    (tmp_path / f"{name}.py").write_text(TOOL)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def _plugin(registry: AgentToolRegistry, module: str, target: str) -> None:
    register_plugins(registry, [EntryPoint("exits", f"{module}:{target}", ENTRY_POINT_GROUP)])


@pytest.mark.parametrize(
    ("how", "target", "message"),
    [
        ("import", "ExitTool", "Could not load plugin 'exits' (r6_exit_tools:ExitTool): "
         "SystemExit: 9"),
        ("", "exit_factory", "Plugin 'exits' (r6_exit_tools:exit_factory): its factory raised "
         "SystemExit: 7"),
        ("", "interrupt_factory", "Plugin 'exits' (r6_exit_tools:interrupt_factory): its "
         "factory raised KeyboardInterrupt"),
        ("schema", "ExitTool", "Plugin 'exits' (r6_exit_tools:ExitTool) breaks the tool "
         "contract: r6_exit_tools.ExitTool could not be checked against the tool contract: "
         "SystemExit: 3"),
    ],
)  # fmt: skip
def test_a_plugin_exiting_at_import_in_its_factory_or_schema_is_refused_naming_it(
    module: str, monkeypatch: pytest.MonkeyPatch, how: str, target: str, message: str
) -> None:
    monkeypatch.setenv("R6_EXIT_HOW", how)
    registry = AgentToolRegistry(RecordingLogger())
    with pytest.raises(PluginLoadError) as raised:
        _plugin(registry, module, target)
    assert str(raised.value) == message
    assert registry.registered_tools == ()


@pytest.mark.parametrize("how", ["constructor", "constructor0"])
def test_a_plugin_constructor_exiting_is_a_tool_that_could_not_be_built(
    module: str, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    monkeypatch.setenv("R6_EXIT_HOW", how)
    registry = AgentToolRegistry(RecordingLogger())
    _plugin(registry, module, "ExitTool")
    with pytest.raises(ToolContractError) as raised:
        registry.build_all()
    why = "SystemExit" if how == "constructor" else "SystemExit: 0"
    assert str(raised.value) == f"Tool 'exit_tool' could not be built: {why}"


def test_a_tool_file_whose_constructor_exits_is_refused_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("R6_EXIT_HOW", "constructor0")
    path = tmp_path / "exit_file_tools.py"
    path.write_text(TOOL)
    registry = AgentToolRegistry(RecordingLogger())
    with pytest.raises(PluginLoadError) as raised:
        register_tool_modules(registry, load_tool_modules([str(path)]))
    assert str(raised.value) == f"Tool ExitTool in {path} could not be built: SystemExit: 0"


def test_a_real_ctrl_c_while_a_factory_runs_still_interrupts(
    module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("R6_EXIT_HOW", "")
    with pytest.raises(KeyboardInterrupt):
        _plugin(AgentToolRegistry(RecordingLogger()), module, "ctrl_c_factory")


def test_serve_with_a_constructor_calling_sys_exit_0_fails_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "exit_file_tools.py"
    path.write_text(textwrap.dedent(TOOL))
    env = {
        **os.environ,
        "APTIX_DATA_DIR": str(tmp_path),
        "APTIX_TOOL_MODULES": str(path),
        "APTIX_LOAD_PLUGINS": "false",
        "R6_EXIT_HOW": "constructor0",
    }
    command = [str(Path(sys.executable).parent / "aptix"), "serve", "--port", "0"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"error: Tool ExitTool in {path} could not be built: SystemExit: 0"
    )
