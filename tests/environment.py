"""A test's own settings: no ``APTIX_*`` variable of the shell, no ``aptix.toml`` here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def own_settings(
    monkeypatch: pytest.MonkeyPatch, folder: Path, data_dir: Path | None = None
) -> None:
    """Work in ``folder`` with every ``APTIX_*`` variable unset but the data dir (``folder``)."""
    monkeypatch.chdir(folder)
    for name in list(os.environ):
        # Variable names are read whatever their case (aptix_port too).
        if name.upper().startswith("APTIX_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("APTIX_DATA_DIR", str(data_dir or folder))


def run_aptix(args: list[str], folder: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    """``python -m aptix ARGS`` in ``folder``, its only ``APTIX_*`` variables ``variables``.

    Its output is captured as text; a run of more than two minutes fails the test.
    """
    # Variable names are read whatever their case: none of the shell's may slip through.
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("APTIX_")}
    return subprocess.run(
        [sys.executable, "-m", "aptix", *args],
        env=env | variables,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
