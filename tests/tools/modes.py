"""A copy of the built-in mode catalog whose default mode also offers the given tools."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml


def modes_offering(folder: Path, *tools: str) -> Path:
    text = resources.files("aptix.modes").joinpath("catalog.yaml").read_text(encoding="utf-8")
    document = yaml.safe_load(text)
    general = next(m for m in document["modes"] if m["isDefault"])
    general["tools"] = [*general["tools"], *tools]
    path = folder / "modes.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path
