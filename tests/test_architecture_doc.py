"""docs/architecture.md names only modules that exist, and its layers are the checked ones."""

from __future__ import annotations

import configparser
import importlib
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def _resolve(dotted: str) -> object:
    """The module or attribute ``dotted`` names: the longest importable prefix, then getattr."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name)
        return found
    raise ModuleNotFoundError(dotted)


def test_every_module_the_page_names_exists() -> None:
    names = set(re.findall(r"`(aptix(?:\.\w+)+)`", PAGE))
    assert len(names) > 30
    missing = []
    for dotted in sorted(names):
        try:
            _resolve(dotted)
        except (ModuleNotFoundError, AttributeError):
            missing.append(dotted)
    assert missing == []


def test_every_path_the_page_names_exists() -> None:
    paths = set(re.findall(r"`((?:src|scripts|docs|tests)/[\w./-]+|\.importlinter)`", PAGE))
    assert "src/aptix/tools/builtin/" in paths
    assert [p for p in sorted(paths) if not (ROOT / p).exists()] == []


def test_the_layers_on_the_page_are_the_ones_lint_imports_checks() -> None:
    block = re.search(r"```text\n(.*?)```", PAGE, re.DOTALL)
    assert block is not None
    on_page = block.group(1).split("\n")[:-1]
    contracts = configparser.ConfigParser()
    contracts.read(ROOT / ".importlinter")
    checked = contracts["importlinter:contract:layers"]["layers"].strip().split("\n")
    assert on_page == [line.strip() for line in checked]
    for layer in on_page:
        for name in layer.split(" : "):
            # Found, not imported: importing aptix.__main__ would run the CLI.
            assert importlib.util.find_spec(f"aptix.{name}") is not None, name
