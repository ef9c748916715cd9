"""A mode catalog file is read as every configured file is (``aptix.config_files``)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from aptix.errors import ConfigurationError
from aptix.modes.catalog import load_mode_catalog
from tests.modes.test_catalog import ID_A, _catalog, _mode


def _refusal(path: Path) -> str:
    """The message of the ConfigurationError loading ``path`` raises (within 30 s)."""
    found: list[BaseException] = []

    def load() -> None:
        try:
            load_mode_catalog(path)
        except ConfigurationError as exc:
            found.append(exc)

    # A thread, so that a loader that blocks on a FIFO fails the test instead of hanging it.
    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive(), f"loading {path} blocked"
    assert found, f"{path} was accepted"
    return str(found[0])


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "modes.yaml")
    assert _refusal(tmp_path / "modes.yaml") == (
        f"Mode catalog {tmp_path / 'modes.yaml'}: is a FIFO (named pipe), not a regular file."
    )


def test_a_link_to_a_device_is_refused_naming_its_target(tmp_path: Path) -> None:
    (tmp_path / "modes.yaml").symlink_to("/dev/null")
    assert _refusal(tmp_path / "modes.yaml").endswith(
        "is a character device, not a regular file (it resolves to /dev/null)."
    )


def test_a_catalog_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    path = _catalog(tmp_path, _mode())
    path.write_text(path.read_text() + "  welcomeMessage: " + "x" * 1_048_576 + "\n")
    assert "is larger than 1,048,576 bytes" in _refusal(path)


def test_deep_nesting_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "modes.yaml"
    path.write_text("modes: " + "[" * 20_000 + "]" * 20_000 + "\n")
    assert _refusal(path) == (
        f"Mode catalog {path}: nests more than 50 levels deep (line 1, column 57), "
        "deeper than Aptix reads."
    )


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path: Path) -> None:
    path = _catalog(tmp_path, _mode())
    path.write_text(path.read_text() + "  isDefault: false\n")
    assert _refusal(path) == (
        f"Mode catalog {path}: is not valid YAML (the key 'isDefault' is given twice, "
        "on lines 7 and 10)."
    )


def test_aliases_that_expand_past_the_limit_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "modes.yaml"
    lines = [
        "modes:",
        f"  - id: {ID_A}",
        "    key: general",
        "    displayName: &s " + "x" * 100_000,
        "    description: d",
        "    instructions: i",
        "    isDefault: true",
        "    exampleUtterances:",
        *["      - *s"] * 100,
    ]
    path.write_text("\n".join(lines) + "\n")
    assert "expands through its YAML aliases ('*name') to more than 1,048,576" in _refusal(path)


def test_a_catalog_sharing_text_through_an_alias_still_loads(tmp_path: Path) -> None:
    path = _catalog(tmp_path, _mode())
    text = path.read_text().replace("instructions: Behave.", "instructions: &i Behave.")
    path.write_text(text + "  welcomeMessage: *i\n")
    assert load_mode_catalog(path).default_mode.welcome_message == "Behave."


def test_a_missing_catalog_still_says_it_cannot_be_read(tmp_path: Path) -> None:
    assert "cannot read the file" in _refusal(tmp_path / "absent.yaml")
