"""A malformed ``APTIX_LLM_BASE_URL`` stops every command with one line, before anything runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.settings import AptixSettings

runner = CliRunner()

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
    assert lines[0].startswith("error: Invalid settings: APTIX_LLM_BASE_URL: "), stderr
    return lines[0]


@pytest.mark.parametrize("url", MALFORMED)
def test_a_malformed_model_url_is_one_line_before_chat_starts(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APTIX_LLM_BASE_URL", url)
    monkeypatch.setenv("APTIX_LLM_MODEL", "x")
    result = runner.invoke(app, ["chat"], input="hi\n")
    assert result.exit_code == 2, result.output
    line = _one_error_line(result.stderr)
    assert "Traceback" not in result.output
    assert "\x1b" not in line  # shown escaped, never sent to the terminal
    assert "e.g. http://localhost:11434/v1" in line


def test_the_message_escapes_and_masks_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "APTIX_LLM_BASE_URL", f"http://ann:{SECRET}@127.0.0.1:abc/v1\x1b?api-key={SECRET}"
    )
    result = runner.invoke(app, ["tools", "list"])
    assert result.exit_code == 2, result.output
    line = _one_error_line(result.stderr)
    assert SECRET not in line
    assert "'http://***@127.0.0.1:abc/v1\\x1b?api-key=***' is not a valid URL" in line


def test_a_bad_port_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_LLM_BASE_URL", "http://127.0.0.1:abc/v1")
    line = _one_error_line(runner.invoke(app, ["tools", "list"]).stderr)
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
    _one_error_line(done.stderr)
    assert "startup failed" not in done.stderr
    assert done.stdout == ""
