"""A workflow file's problem is one line in every output that prints it (review r2 F1, round 71).

A line break in the file's name, its workflow id, a key or a quoted value is shown (LF as
``␊``), never made: the file cannot start an output line of its own ("All 7 workflows are
valid.") for a person who skims or a CI gate that greps.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.workflows.loader import ManifestProblem
from aptix.workflows.sync import left_out
from tests.environment import run_aptix

runner = CliRunner()

FORGED_VALUE = "The workflow catalog is valid."
FORGED_NAME = "All 7 workflows are valid.yaml"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("APTIX_SEMANTIC_MATCHING", "false")
    monkeypatch.delenv("APTIX_WORKFLOWS_PATH", raising=False)


def _hostile_folder(tmp_path: Path) -> Path:
    """The reviewer's files: a newline in a value, in a file's name, in a key and in a tool."""
    folder = tmp_path / "flows"
    folder.mkdir()
    (folder / "content.yaml").write_text(
        f'workflowId: "ok_id\\n{FORGED_VALUE}"\ntitle: "t"\n', encoding="utf-8"
    )
    (folder / f"name\n{FORGED_NAME}").write_text("workflowId: x\n", encoding="utf-8")
    (folder / "keys.yaml").write_text(
        'workflowId: y\ntitle: T\npermittedTools: ["agent_\\r\\nFORGED tool"]\n"bad\\nkey": 1\n',
        encoding="utf-8",
    )
    return folder


def _assert_nothing_forged(text: str) -> None:
    for line in text.splitlines():
        assert not line.startswith(("All 7", "The workflow", "FORGED", "key")), text


def test_validate_prints_each_problem_on_one_line_showing_its_newlines(tmp_path: Path) -> None:
    result = runner.invoke(app, ["workflows", "validate", str(_hostile_folder(tmp_path))])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    problems = [line for line in lines if line.startswith("✗ ")]
    assert len(lines) == len(problems) + 1, result.stdout  # and the count
    assert lines[-1] == f"{len(problems)} problem(s) in the workflow catalog."
    assert f"(workflow 'ok_id␊{FORGED_VALUE}', field 'workflowId')" in result.stdout
    forged_file = f"name␊{FORGED_NAME} (workflow 'x', field 'title'): title is missing."
    assert any(line.endswith(f"/{forged_file}") for line in problems), result.stdout
    assert "field 'bad␊key'): 'bad␊key' is not a workflow manifest field." in result.stdout
    assert "unknown tool 'agent_␍␊FORGED tool'" in result.stdout
    _assert_nothing_forged(result.stdout)


def test_validate_json_keeps_the_newlines_as_data(tmp_path: Path) -> None:
    result = runner.invoke(app, ["workflows", "validate", str(_hostile_folder(tmp_path)), "--json"])
    problems = json.loads(result.stdout)["problems"]
    assert f"ok_id\n{FORGED_VALUE}" in [p["workflowId"] for p in problems]
    assert any(p["source"].endswith(f"name\n{FORGED_NAME}") for p in problems)


def test_a_command_that_loads_the_catalog_shows_its_newlines_on_the_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APTIX_WORKFLOWS_PATH", str(_hostile_folder(tmp_path)))
    result = runner.invoke(app, ["workflows", "list"])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"(workflow 'ok_id␊{FORGED_VALUE}', field 'workflowId')" in result.stderr
    assert f"name␊{FORGED_NAME} (workflow 'x'" in result.stderr


def test_serve_shows_the_newlines_on_its_one_start_up_error_line(tmp_path: Path) -> None:
    done = run_aptix(
        ["serve", "--port", "0"],
        tmp_path,
        APTIX_DATA_DIR=str(tmp_path / "data"),
        APTIX_SEMANTIC_MATCHING="false",
        APTIX_WORKFLOWS_PATH=str(_hostile_folder(tmp_path)),
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: Workflow catalog is invalid")
    assert f"(workflow 'ok_id␊{FORGED_VALUE}', field 'workflowId')" in done.stderr
    assert f"name␊{FORGED_NAME} (workflow 'x'" in done.stderr


def test_a_stored_revisions_sentence_is_one_line() -> None:
    problem = ManifestProblem(
        "store (org acme) revision 2", "annotate", "permittedTools.0", "unknown tool 'a\nb'."
    )
    (sentence,) = left_out([problem])
    assert "\n" not in sentence
    assert "unknown tool 'a␊b'" in sentence


def test_every_line_break_is_shown_as_the_terminal_shows_a_control() -> None:
    from aptix.invisible import on_one_line  # here: the tests above run on the code before it

    shown = on_one_line("a\nb\rc\r\nd\ve\ff\x1cg\x85h\u2028i\u2029j\tk")
    assert shown == "a␊b␍c␍␊d␋e␌f␜g<U+0085>h<U+2028>i<U+2029>j\tk"
    assert len(shown.splitlines()) == 1


def test_a_file_that_is_not_yaml_is_told_by_line_and_column_with_no_pictures(
    tmp_path: Path,
) -> None:
    # PyYAML lays its error out over lines quoting the text; one line reads where, then what.
    folder = tmp_path / "flows"
    folder.mkdir()
    (folder / "broken.yaml").write_text("workflowId: [unclosed\n", encoding="utf-8")
    result = runner.invoke(app, ["workflows", "validate", str(folder)])
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0].endswith(
        "broken.yaml (workflow): is not valid YAML (line 1, column 13 ('workflowId: "
        "[unclosed'): while parsing a flow sequence; line 2, column 1: expected ',' or ']', "
        "but got '<stream end>')."
    ), result.stdout
    assert "␊" not in result.stdout


def test_a_quote_left_open_is_told_by_the_line_it_opens_on(tmp_path: Path) -> None:
    # The parser gives up at the file's end (review s2 F2): where it read from is the mistake.
    folder = tmp_path / "flows"
    folder.mkdir()
    text = 'workflowId: x\ntitle: "Refund\n' + "".join(f"k{i}: v\n" for i in range(18))
    (folder / "quote.yaml").write_text(text, encoding="utf-8")
    result = runner.invoke(app, ["workflows", "validate", str(folder), "--json"])
    [problem] = json.loads(result.stdout)["problems"]
    assert problem["message"] == (
        "is not valid YAML (line 2, column 8 ('title: \"Refund'): while scanning a quoted "
        "scalar; line 21, column 1: found unexpected end of stream)."
    )
