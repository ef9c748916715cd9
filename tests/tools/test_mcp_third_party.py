"""Real third-party MCP servers as tool sources: git (PyPI) and everything (npm, stdio + HTTP).

They are installed by the ``test`` extra and by scripts/check; a missing one fails the test.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.tools import AgentToolCall
from tests.tools.mcp_servers import EVERYTHING, console_script, everything_over_http, npm_server


def _settings(tmp_path: Path, servers: dict[str, Any]) -> AptixSettings:
    return AptixSettings(data_dir=tmp_path, load_plugins=False, mcp_servers=servers)


async def _call(runtime: Runtime, name: str, arguments: dict[str, Any]) -> AgentToolCall:
    return await runtime.executor.execute(
        AgentToolCall("c", name, json.dumps(arguments)), runtime.tool_context()
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    for args in (
        ["init", "-q"],
        ["config", "user.email", "dev@example.com"],
        ["config", "user.name", "Dev"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True)
    (path / "notes.txt").write_text("first\n")
    subprocess.run(["git", "add", "notes.txt"], cwd=path, check=True)
    subprocess.run(["git", "commit", "-qm", "First note"], cwd=path, check=True)
    (path / "notes.txt").write_text("first\nsecond\n")
    return path


async def test_git_server_reads_a_repository_and_gates_destructive_tools(
    tmp_path: Path, repo: Path
) -> None:
    server = {"command": console_script("mcp-server-git"), "args": ["--repository", str(repo)]}
    async with open_runtime(_settings(tmp_path, {"git": server})) as runtime:
        names = runtime.registry.registered_tools
        log = await _call(runtime, "git_git_log", {"repo_path": str(repo)})
        diff = await _call(runtime, "git_git_diff_unstaged", {"repo_path": str(repo)})
        reset = await _call(runtime, "git_git_reset", {"repo_path": str(repo)})
    assert {"git_git_status", "git_git_log", "git_git_reset"} <= set(names)
    assert log.was_executed, log.error_message
    assert "First note" in log.result_json  # type: ignore[operator]
    assert "+second" in json.loads(diff.result_json or "")["content"][0]["text"]
    # git_reset is destructive: under the default policy it waits for approval, unrun.
    assert reset.requires_client_execution
    assert json.loads(reset.result_json or "")["kind"] == "approval_request"
    assert (repo / "notes.txt").read_text() == "first\nsecond\n"


async def test_everything_server_over_stdio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    npm_server("mcp-server-everything")  # installed, so npx needs no download
    server = {"command": "npx", "args": ["--no-install", EVERYTHING, "stdio"], "prefix": "ev"}
    async with open_runtime(_settings(tmp_path, {"everything": server})) as runtime:
        await _check_everything(runtime)
    # A tool that runs only as an MCP task would fail every call: left out, with a warning.
    assert "tool 'simulate-research-query' is left out: it runs only as an MCP task" in (
        capsys.readouterr().err
    )


@pytest.fixture
def everything_http() -> Iterator[str]:
    with everything_over_http() as (url, _):
        yield url


async def test_everything_server_over_streamable_http(tmp_path: Path, everything_http: str) -> None:
    server = {"url": everything_http, "prefix": "ev", "headers": {"X-Test": "aptix"}}
    async with open_runtime(_settings(tmp_path, {"everything": server})) as runtime:
        await _check_everything(runtime)


async def _check_everything(runtime: Runtime) -> None:
    names = runtime.registry.registered_tools
    # Names with '-' are valid as they are; the prefix comes first.
    assert {"ev_echo", "ev_get-sum", "ev_get-structured-content"} <= set(names)
    assert "ev_simulate-research-query" not in names
    echo = await _call(runtime, "ev_echo", {"message": "hello"})
    assert echo.was_executed, echo.error_message
    assert "hello" in json.loads(echo.result_json or "")["content"][0]["text"]
    total = await _call(runtime, "ev_get-sum", {"a": 2, "b": 40})
    assert "42" in json.loads(total.result_json or "")["content"][0]["text"]
    structured = await _call(runtime, "ev_get-structured-content", {"location": "New York"})
    payload = json.loads(structured.result_json or "")
    assert isinstance(payload["structuredContent"], dict)
    image = await _call(runtime, "ev_get-tiny-image", {})
    kinds = [c["type"] for c in json.loads(image.result_json or "")["content"]]
    assert "image" in kinds
    schema = runtime.registry.get_tool_type("ev_get-sum").schema()  # type: ignore[union-attr]
    assert "$schema" not in json.dumps(schema)
