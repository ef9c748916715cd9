"""The unknown-``APTIX_*`` warning is a line of the log, in its format and escaped (review r8 F1).

It was logged as the settings were read, before the command set up its log, so Python's
last-resort handler wrote it bare: the one stderr line that was not JSON under
``APTIX_LOG_JSON=true``, and the variable's name as it is, so an escape sequence in it reached
the terminal and a newline in it forged a log line of its own.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.environment import run_aptix

HOSTILE = "APTIX_FOO\x1b]0;pwned\x07\nERROR aptix forged line"
QUIET = {"APTIX_LOAD_PLUGINS": "false", "APTIX_SEMANTIC_MATCHING": "false"}


def test_the_warning_is_a_json_line_when_logs_are_json(tmp_path: Path) -> None:
    done = run_aptix(
        ["tools", "list"],
        tmp_path,
        APTIX_DATA_DIR=str(tmp_path / "data"),
        APTIX_LOG_JSON="true",
        APTIX_LLM_MODLE="x",
        **QUIET,
    )
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stderr.splitlines()]  # every line is JSON
    warned = [r for r in records if r["logger"] == "aptix.settings"]
    assert [(r["level"], r["message"]) for r in warned] == [
        (
            "warning",
            "APTIX_LLM_MODLE is not an Aptix setting and is ignored. Did you mean APTIX_LLM_MODEL?",
        )
    ]


def test_a_hostile_variable_name_is_escaped_on_one_plain_line(tmp_path: Path) -> None:
    done = run_aptix(
        ["tools", "list"],
        tmp_path,
        APTIX_DATA_DIR=str(tmp_path / "data"),
        **QUIET,
        **{HOSTILE: "1"},
    )
    assert done.returncode == 0, done.stderr
    [line] = done.stderr.splitlines()  # no forged second line
    assert "\x1b" not in line
    assert "\x07" not in line
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\d [\d:,]+ WARNING aptix\.settings \[-\] "
        r"APTIX_FOO\\x1b\]0;pwned\\x07\\nERROR aptix forged line is not an Aptix setting and is "
        r"ignored\.",
        line,
    ), line


def test_before_the_log_format_is_known_the_name_is_escaped_too(tmp_path: Path) -> None:
    done = run_aptix(
        ["config", "show"],
        tmp_path,
        APTIX_DATA_DIR=str(tmp_path),
        APTIX_PORT="abc",
        **{HOSTILE: "1"},
    )
    assert done.returncode == 2, done.stderr
    warning, error = done.stderr.splitlines()
    assert warning == (
        "APTIX_FOO\\x1b]0;pwned\\x07\\nERROR aptix forged line is not an Aptix setting and is "
        "ignored."
    )
    assert error.startswith("error: Invalid settings: APTIX_PORT")
