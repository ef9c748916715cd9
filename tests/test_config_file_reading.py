"""``APTIX_CONFIG_FILE`` is read as every configured file is (``aptix.config_files``).

A FIFO or a device was said not to exist; deep nesting was a RecursionError traceback.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path / "data"))
    for name in ("APTIX_API_KEYS", "APTIX_LLM_API_KEY", "APTIX_CONFIG_FILE", "APTIX_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)


def _error(path: Path | str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("APTIX_CONFIG_FILE", str(path))
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr


def test_a_fifo_is_named_as_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    os.mkfifo(tmp_path / "aptix.toml")
    assert _error(tmp_path / "aptix.toml", monkeypatch).startswith(
        "error: APTIX_CONFIG_FILE names a FIFO (named pipe), not a regular file: "
        f"{tmp_path / 'aptix.toml'}."
    )


def test_a_device_is_named_as_one(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _error("/dev/zero", monkeypatch).startswith(
        "error: APTIX_CONFIG_FILE names a character device, not a regular file: /dev/zero."
    )


def test_deep_nesting_is_one_line_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "deep.toml"
    path.write_text("a = " + "[" * 20_000 + "]" * 20_000 + "\n")
    assert _error(path, monkeypatch).startswith(
        f"error: {path} nests too deeply for Aptix to read."
    )


def test_a_file_over_the_size_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big.toml"
    path.write_text('llm_model = "' + "x" * 1_048_576 + '"\n')
    assert _error(path, monkeypatch).startswith(
        f"error: {path} is larger than 1,048,576 bytes, the most a configured file may be."
    )
