"""A test's own settings: no ``APTIX_*`` variable of the shell, no ``aptix.toml`` here."""

from __future__ import annotations

import os
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
