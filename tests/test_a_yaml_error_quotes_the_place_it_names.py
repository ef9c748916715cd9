"""A YAML error quotes the line, and the part of it, that each place it names is in (review s2 F1).

PyYAML numbers lines at CR, NEL, LS and PS as well as LF; the quote was cut at LF only, so a file
with other line ends quoted its start. A long line was quoted from its start, never reaching the
column named, and a character YAML does not allow was told by offset in "<unicode string>".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.config_files import UnusableFile, parse_yaml

runner = CliRunner()


def _problem(text: str) -> str:
    with pytest.raises(UnusableFile) as caught:
        parse_yaml(text)
    return str(caught.value)


@pytest.mark.parametrize("line_end", ["\r", "\r\n", "\n", "\x85", "\u2028", "\u2029"], ids=repr)
def test_each_place_quotes_its_own_line_whatever_ends_the_lines(line_end: str) -> None:
    text = line_end.join(["workflowId: refund", "title: [unclosed", "x: 1", ""])
    assert _problem(text) == (
        "is not valid YAML (line 2, column 8 ('title: [unclosed'): while parsing a flow "
        "sequence; line 3, column 2 ('x: 1'): expected ',' or ']', but got ':')"
    )


def test_a_file_with_carriage_returns_only_quotes_the_line_not_the_files_start() -> None:
    problem = _problem("workflowId: refund\rtitle: x\rsteps: [\r  a: b\r")
    assert problem == (
        "is not valid YAML (line 3, column 8 ('steps: ['): while parsing a flow sequence; "
        "line 5, column 1: expected ',' or ']', but got '<stream end>')"
    )


def test_a_long_line_is_quoted_around_the_column_named() -> None:
    problem = _problem("workflowId: refund\ntitle: " + "x" * 500 + ": [\n")
    quote = problem.split("('", 1)[1].split("')", 1)[0]
    assert problem.startswith("is not valid YAML (line 2, column 508 ('…")
    assert quote.endswith("xx: [")  # the ':' at column 508 is shown
    assert len(quote) <= 81


def test_the_middle_of_a_long_line_is_quoted_with_both_ends_cut() -> None:
    text = "a: " + "x" * 300 + " b: c " + "y" * 300 + "\n"
    problem = _problem(text)
    quote = problem.split("('", 1)[1].split("')", 1)[0]
    assert problem.startswith("is not valid YAML (line 1, column 306 ('…")
    assert quote.startswith("…x")
    assert quote.endswith("y…")
    assert "x b: c y" in quote
    assert len(quote) <= 82


def test_a_short_indented_line_is_quoted_whole_without_its_indent() -> None:
    assert _problem("a:\n    - 1\n  - [2\n") == (
        "is not valid YAML (line 1, column 1 ('a:'): while parsing a block mapping; "
        "line 3, column 3 ('- [2'): expected <block end>, but found '<block sequence start>')"
    )


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("workflowId: refund\ntitle: a\x07b\n", "line 2, column 9 ('title: a\x07b')"),
        ("workflowId: refund\r\ntitle: a\x07b\r\n", "line 2, column 9 ('title: a\x07b')"),
        ("workflowId: refund\rtitle: a\x07b\r", "line 2, column 9 ('title: a\x07b')"),
        ("workflowId: refund\x85title: a\x07b", "line 2, column 9 ('title: a\x07b')"),
        ("\ufeffa: b\x07", "line 1, column 5 ('a: b\x07')"),  # PyYAML gives a BOM no column
    ],
    ids=["LF", "CRLF", "CR", "NEL", "BOM"],
)
def test_a_character_yaml_does_not_allow_is_told_by_line_and_column(text: str, where: str) -> None:
    assert _problem(text) == (
        f"is not valid YAML ({where}: unacceptable character #x0007: "
        "special characters are not allowed)"
    )


def test_validate_tells_a_control_character_by_line_and_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("APTIX_SEMANTIC_MATCHING", "false")
    monkeypatch.delenv("APTIX_WORKFLOWS_PATH", raising=False)
    folder = tmp_path / "flows"
    folder.mkdir()
    (folder / "wf.yaml").write_text("workflowId: refund\ntitle: a\x07b\n", encoding="utf-8")
    result = runner.invoke(app, ["workflows", "validate", str(folder)])
    assert result.exit_code == 1
    first = result.stdout.splitlines()[0]
    assert "wf.yaml (workflow): is not valid YAML (line 2, column 9 ('title: a" in first
    assert "<unicode string>" not in result.stdout
    assert "position" not in result.stdout
