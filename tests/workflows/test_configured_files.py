"""Workflow files are read as configured files: regular, bounded, strict YAML, keys as written.

A FIFO would block start-up, ``/dev/zero`` would never end, a small file of YAML aliases would
expand to gigabytes, deep nesting was a RecursionError traceback, and a key given twice kept
its last value unseen.
"""

from __future__ import annotations

import os
import threading
import tracemalloc
from pathlib import Path

from aptix.config_files import MAX_FILE_BYTES, MAX_YAML_DEPTH, parse_yaml
from aptix.workflows.loader import ManifestProblem, collect_catalog
from tests.workflows.conftest import KNOWN_TOOLS
from tests.workflows.test_loader import GOOD, write


def _problems(path: Path) -> list[ManifestProblem]:
    return collect_catalog(KNOWN_TOOLS, path)[1]


def test_a_fifo_in_the_folder_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.yaml")
    found: list[list[ManifestProblem]] = []
    # A thread, so that a loader that blocks on the FIFO fails the test instead of hanging it.
    reader = threading.Thread(target=lambda: found.append(_problems(tmp_path)), daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive(), "reading the folder blocked on the FIFO"
    assert [str(p) for p in found[0]] == [
        f"{tmp_path / 'fifo.yaml'} (workflow): is a FIFO (named pipe), not a regular file."
    ]


def test_a_link_to_a_device_is_refused_naming_what_it_resolves_to(tmp_path: Path) -> None:
    (tmp_path / "null.yaml").symlink_to("/dev/null")
    (tmp_path / "folder.yaml").mkdir()
    problems = {p.source: p.message for p in _problems(tmp_path)}
    assert problems == {
        str(tmp_path / "folder.yaml"): "is a directory, not a regular file.",
        str(tmp_path / "null.yaml"): (
            "is a character device, not a regular file (it resolves to /dev/null)."
        ),
    }


def test_a_file_named_directly_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "one.yaml")
    found: list[list[ManifestProblem]] = []
    reader = threading.Thread(
        target=lambda: found.append(_problems(tmp_path / "one.yaml")), daemon=True
    )
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive(), "reading the file blocked on the FIFO"
    assert [p.message for p in found[0]] == ["is a FIFO (named pipe), not a regular file."]


def test_a_file_over_the_size_limit_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    text = GOOD.format(wid="big") + "notes: [" + "x" * MAX_FILE_BYTES + "]\n"
    path = write(tmp_path, "big.yaml", text)
    assert [str(p) for p in _problems(tmp_path)] == [
        f"{path} (workflow): is larger than 1,048,576 bytes, the most a configured file may be."
    ]


def test_aliases_that_expand_past_the_limit_are_refused_without_making_the_copies(
    tmp_path: Path,
) -> None:
    # 200 KB anchored once and named 400 times: a 203 KB file standing for 80 MB of notes.
    lines = [*GOOD.format(wid="bomb").splitlines(), "title: &s " + "x" * 200_000, "notes:"]
    lines = [line for line in lines if line != "title: Plan a trip"]
    path = write(tmp_path, "bomb.yaml", "\n".join([*lines, *["  - *s"] * 400]) + "\n")
    assert path.stat().st_size < MAX_FILE_BYTES
    tracemalloc.start()
    try:
        problems = _problems(tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [str(p) for p in problems] == [
        f"{path} (workflow): expands through its YAML aliases ('*name') to more than "
        "1,048,576 characters, the most a configured file may hold; write the repeated parts "
        "out, or shorten them."
    ]
    assert peak < 20_000_000, f"peak {peak:,} bytes: the aliases were expanded"


def test_aliases_within_the_limit_and_merge_keys_still_work() -> None:
    text = "base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  x: 5\nboth: [*b, *b]\n"
    assert parse_yaml(text) == {
        "base": {"x": 1, "y": 2},
        "other": {"x": 5, "y": 2},
        "both": [{"x": 1, "y": 2}, {"x": 1, "y": 2}],
    }


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "loop.yaml", GOOD.format(wid="loop") + "notes: &n [*n]\n")
    assert [p.message for p in _problems(path)] == [
        "holds an alias inside the node it refers to (a recursive structure, line 9), "
        "which Aptix does not read."
    ]


def test_deep_nesting_is_a_problem_naming_the_file_not_a_recursion_error(tmp_path: Path) -> None:
    depth = 20_000
    path = write(tmp_path, "deep.yaml", "workflowId: deep\nnotes: " + "[" * depth + "]" * depth)
    problems = _problems(tmp_path)
    assert [str(p) for p in problems] == [
        f"{path} (workflow): nests more than {MAX_YAML_DEPTH} levels deep (line 2, column 57), "
        "deeper than Aptix reads."
    ]


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path: Path) -> None:
    text = GOOD.format(wid="refund") + "requiresApproval: true\nstatus: published\n"
    text += "requiresApproval: false\n"
    path = write(tmp_path, "refund.yaml", text)
    assert [str(p) for p in _problems(tmp_path)] == [
        f"{path} (workflow): is not valid YAML (the key 'requiresApproval' is given twice, "
        "on lines 9 and 11)."
    ]
