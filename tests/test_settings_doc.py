"""``docs/settings.md`` is generated from ``AptixSettings`` and documents every setting."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from aptix.settings import AptixSettings
from aptix.settings_doc import env_name, main, render

PAGE = Path(__file__).resolve().parents[1] / "docs" / "settings.md"


def test_the_settings_page_is_up_to_date() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/settings.md is stale: run python -m aptix.settings_doc --write docs/settings.md"
    )


def test_every_setting_has_a_described_row() -> None:
    rows = dict(re.findall(r"^\| `(APTIX_\w+)` \|.*\| (.+) \|$", PAGE.read_text(), re.MULTILINE))
    for name, info in AptixSettings.model_fields.items():
        assert info.description, f"{name} has no description"
        assert rows.get(env_name(name), "").strip(), f"{env_name(name)} is not documented"
    assert set(rows) == {env_name(n) for n in AptixSettings.model_fields} | {"APTIX_CONFIG_FILE"}


def test_check_fails_on_a_stale_page(tmp_path: Path) -> None:
    stale = tmp_path / "settings.md"
    stale.write_text(render().replace("| `APTIX_PORT` |", "| `APTIX_PORTS` |"))
    assert main(["--check", str(stale)]) == 1
    assert main(["--write", str(stale)]) == 0
    assert main(["--check", str(stale)]) == 0


def test_the_module_runs_as_a_script() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "aptix.settings_doc"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert done.stdout == render()
