"""Configuration errors end every command with one line: ``error: <what> — <how to fix>``."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import aptix
from aptix.api.app import create_app
from aptix.cli.main import app
from aptix.settings import AptixSettings

runner = CliRunner()


@pytest.fixture(autouse=True)
def _clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("APTIX_SEMANTIC_MATCHING", "false")
    for name in list(os.environ):
        if name.startswith("APTIX_") and name not in ("APTIX_DATA_DIR", "APTIX_SEMANTIC_MATCHING"):
            monkeypatch.delenv(name)


def _one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: "), stderr
    assert " — " in lines[0], f"no hint: {stderr}"
    return lines[0]


INVALID = {
    "APTIX_DATA_DIR": "/proc/nope/data",
    "APTIX_DATABASE_URL": "garbage",
    "APTIX_LLM_BASE_URL": "localhost:11434",
    "APTIX_LLM_API": "assistants",
    "APTIX_LLM_TIMEOUT_SECONDS": "-1",
    "APTIX_LLM_TEMPERATURE": "hot",
    "APTIX_LLM_MAX_OUTPUT_TOKENS": "0",
    "APTIX_LLM_EXTRA_HEADERS": '{"bad header": "x"}',
    "APTIX_LLM_MAX_RETRIES": "many",
    "APTIX_MAX_ITERATIONS": "0",
    "APTIX_TURN_TOKEN_BUDGET": "0",
    "APTIX_TURN_LEASE_SECONDS": "0",
    "APTIX_HISTORY_TURNS": "-1",
    "APTIX_MODES_PATH": "/nope/modes.yaml",
    "APTIX_WORKFLOWS_PATH": "/nope/workflows",
    "APTIX_SEMANTIC_MATCHING": "maybe",
    "APTIX_TOOL_TIMEOUT_SECONDS": "0",
    "APTIX_TOOL_MAX_RESULT_BYTES": "0",
    "APTIX_LOAD_PLUGINS": "maybe",
    "APTIX_LOG_LEVEL": "garbage",
    "APTIX_LOG_JSON": "maybe",
    "APTIX_OTEL": "maybe",
    "APTIX_HOST": "",
    "APTIX_PORT": "eighty",
    "APTIX_MAX_BODY_BYTES": "0",
    "APTIX_LLM_CONTEXT_TOKENS": "lots",
    "APTIX_CONTEXT_STRATEGY": "forget",
    "APTIX_MAX_TOOL_CALLS_PER_RESPONSE": "0",
    "APTIX_MAX_MODEL_TEXT_CHARS": "0",
    "APTIX_PUBLIC_METRICS": "maybe",
    "APTIX_MCP_SERVERS": '{"git": {"command": "mcp-server-git", "url": "http://x"}}',
    "APTIX_TOOL_MODULES": '["unclosed',
    "APTIX_TOOL_THREADS": "0",
    "APTIX_RATE_LIMIT": "lots",
    "APTIX_TOKEN_BUDGET": "lots",
    "APTIX_MAX_CONCURRENT_TURNS": "0",
    "APTIX_REDIS_URL": "ftp://user:secret@host",
    "APTIX_REDIS_KEY_PREFIX": "",
    "APTIX_LIMITS_WHEN_REDIS_DOWN": "sometimes",
    "APTIX_OPENAI_CLIENT_TOOLS": "maybe",
    "APTIX_MATCH_ARBITER": "sometimes",
    "APTIX_MATCH_CASCADE": "maybe",
}


@pytest.mark.parametrize(("name", "value"), INVALID.items())
def test_every_invalid_setting_is_one_line(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, value)
    result = runner.invoke(app, ["tools", "list"])
    assert result.exit_code == 2, result.output
    line = _one_error_line(result.stderr)
    assert name in line or value in line, line
    assert result.stdout == ""


def test_the_invalid_settings_list_covers_every_field() -> None:
    fields = {f"APTIX_{n.upper()}" for n in AptixSettings.model_fields}
    # API keys are checked by `serve` (test_config_cli) and the app, not by every command.
    assert (
        fields - set(INVALID) - {"APTIX_API_KEYS", "APTIX_LLM_API_KEY", "APTIX_LLM_MODEL"} == set()
    )


def test_log_level_is_read_in_any_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_LOG_LEVEL", "debug")
    assert AptixSettings().log_level == "DEBUG"
    result = runner.invoke(app, ["tools", "list", "--json"])
    assert result.exit_code == 0, result.output
    assert logging.getLogger("aptix").level == logging.DEBUG


def test_toml_syntax_error_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "aptix.toml").write_text('llm_model = "x\nport = [\n')
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 2
    line = _one_error_line(result.stderr)
    assert "aptix.toml is not valid TOML" in line
    assert "fix the syntax in aptix.toml" in line


def test_a_missing_database_server_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_DATABASE_URL", "postgresql+asyncpg://aptix:secret@127.0.0.1:9/aptix")
    result = runner.invoke(app, ["sessions", "list"])
    assert result.exit_code == 2
    line = _one_error_line(result.stderr)
    assert "Cannot open the database at postgresql+asyncpg://aptix:***@127.0.0.1:9/aptix" in line
    assert "secret" not in line


def test_a_database_error_is_told_in_the_drivers_words() -> None:
    from sqlalchemy.exc import DBAPIError

    from aptix.db.engine import driver_message

    class DriverError(Exception):
        pass

    wrapped = DBAPIError.instance(
        "SELECT 1",
        None,
        DriverError("<class 'asyncpg.X'>: database \"x\" does not exist"),
        DriverError,
    )
    assert "sqlalche.me" in str(wrapped)
    assert driver_message(wrapped) == 'database "x" does not exist'
    assert driver_message(OSError(111, "Connect call failed")) == "[Errno 111] Connect call failed"


def test_broken_modes_yaml_keeps_the_yaml_explanation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modes = tmp_path / "modes.yaml"
    modes.write_text("modes: [\n")
    monkeypatch.setenv("APTIX_MODES_PATH", str(modes))
    result = runner.invoke(app, ["modes", "list"])
    assert result.exit_code == 2
    line = _one_error_line(result.stderr)
    assert "expected the node content, but found '<stream end>'" in line
    assert f"fix {modes}" in line


def _serve(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aptix", "serve", "--port", "0"],
        env={**os.environ, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "env",
    [
        {"APTIX_DATABASE_URL": "garbage"},
        {"APTIX_DATABASE_URL": "postgresql+asyncpg://aptix:pw@127.0.0.1:9/aptix"},
        {"APTIX_MODES_PATH": "broken.yaml"},
        {"APTIX_WORKFLOWS_PATH": "/nope"},
        {"APTIX_LOG_LEVEL": "garbage"},
    ],
    ids=["garbage-url", "no-server", "broken-modes", "missing-workflows", "log-level"],
)
def test_serve_reports_configuration_errors_before_announcing(
    env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "broken.yaml").write_text("modes: [\n")
    done = _serve(env, tmp_path)
    assert done.returncode == 2
    _one_error_line(done.stderr)
    assert "Aptix API on" not in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_serve_refuses_a_port_out_of_range(port: str) -> None:
    # 70000 used to be announced as is while the socket took 70000 - 65536.
    done = runner.invoke(app, ["serve", "--port", port])
    assert done.exit_code == 2
    assert "Invalid value for '--port'" in done.stderr
    assert "Aptix API on" not in done.output


def test_version_has_one_source() -> None:
    import importlib.metadata

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"aptix {importlib.metadata.version('aptix')}\n"
    assert aptix.__version__ == importlib.metadata.version("aptix")
    assert create_app(AptixSettings()).version == aptix.__version__


def test_a_failed_tool_call_prints_its_error_once() -> None:
    result = runner.invoke(app, ["tools", "call", "agent_change_mode", '{"mode": "general"}'])
    assert result.exit_code == 1
    assert result.stderr.count("session id is missing") == 1, result.stderr
    assert result.stderr.startswith("error: ")


# A malformed APTIX_LLM_BASE_URL stops every command with one line, before anything runs.
SECRET = "s3cret-pw"

#: URLs that start with http(s):// but that the HTTP client cannot open.
MALFORMED = [
    "http://127.0.0.1:abc/v1",
    "http://[::1",
    "https://[zz]/v1",
    "http://127.0.0.1\x1b[31m/v1",
    "http://127.0.0.1:99999/v1",
    "http:///v1",
]


def _base_url_error(stderr: str) -> str:
    """The one line a malformed APTIX_LLM_BASE_URL gets."""
    line = _one_error_line(stderr)
    assert line.startswith("error: Invalid settings: APTIX_LLM_BASE_URL: "), stderr
    return line


@pytest.mark.parametrize("url", MALFORMED)
def test_a_malformed_model_url_is_one_line_before_chat_starts(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APTIX_LLM_BASE_URL", url)
    monkeypatch.setenv("APTIX_LLM_MODEL", "x")
    result = runner.invoke(app, ["chat"], input="hi\n")
    assert result.exit_code == 2, result.output
    line = _base_url_error(result.stderr)
    assert "Traceback" not in result.output
    assert "\x1b" not in line  # shown escaped, never sent to the terminal
    assert "e.g. http://localhost:11434/v1" in line


def test_the_message_escapes_and_masks_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "APTIX_LLM_BASE_URL", f"http://ann:{SECRET}@127.0.0.1:abc/v1\x1b?api-key={SECRET}"
    )
    result = runner.invoke(app, ["tools", "list"])
    assert result.exit_code == 2, result.output
    line = _base_url_error(result.stderr)
    assert SECRET not in line
    assert "'http://***@127.0.0.1:abc/v1\\x1b?api-key=***' is not a valid URL" in line


def test_a_bad_port_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_LLM_BASE_URL", "http://127.0.0.1:abc/v1")
    line = _base_url_error(runner.invoke(app, ["tools", "list"]).stderr)
    assert "'http://127.0.0.1:abc/v1' is not a valid URL (Invalid port: 'abc')" in line


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        ("http://localhost:11434/v1", "http://localhost:11434/v1"),
        ("https://[::1]:8443/v1", "https://[::1]:8443/v1"),
        ("HTTPS://llm.example/v1?api-version=2", "HTTPS://llm.example/v1?api-version=2"),
        (" http://127.0.0.1:8080/v1\n", "http://127.0.0.1:8080/v1"),
    ],
)
def test_well_formed_model_urls_are_kept(url: str, kept: str) -> None:
    assert AptixSettings(llm_base_url=url).llm_base_url == kept


def test_serve_refuses_a_malformed_model_url_before_starting(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "aptix", "serve", "--port", "0"],
        env={**os.environ, "APTIX_LLM_BASE_URL": "http://127.0.0.1:abc/v1", "APTIX_LLM_MODEL": "x"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    _base_url_error(done.stderr)
    assert "startup failed" not in done.stderr
    assert done.stdout == ""


def test_a_redis_url_without_the_redis_client_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_REDIS_URL", "redis://127.0.0.1:6379/9")
    monkeypatch.setitem(sys.modules, "redis", None)  # as if `aptix[redis]` were not installed
    monkeypatch.setitem(sys.modules, "redis.asyncio", None)
    done = runner.invoke(app, ["tools", "list"])
    assert done.exit_code == 2
    line = _one_error_line(done.stderr)
    assert "APTIX_REDIS_URL needs the Redis client" in line
    assert "pip install 'aptix[redis]'" in line
