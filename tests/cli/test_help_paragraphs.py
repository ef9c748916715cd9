"""A command's help wraps each paragraph to the terminal (review r2, F7).

Typer kept the docstring's line breaks after its first paragraph and rich wrapped each line
again, so ``aptix chat -h`` and ``aptix workflows validate -h`` ended lines after two words.
"""

from __future__ import annotations

import itertools

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app

runner = CliRunner()
WIDTH = 80
#: rich pads the help text by one column on each side.
TEXT_WIDTH = WIDTH - 2


def _description(command: list[str]) -> list[str]:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "Usage:" in line) + 1
    end = next(i for i, line in enumerate(lines) if line.startswith("╭"))
    return [line.strip() for line in lines[start:end]]


@pytest.mark.parametrize("command", [["chat"], ["workflows", "validate"], ["serve"], ["mcp"]])
def test_no_line_of_a_paragraph_ends_before_the_width(command: list[str]) -> None:
    lines = _description(command)
    assert any(lines)
    for line, following in itertools.pairwise(lines):
        if line and following:  # the next word would have fitted on this line
            assert len(line) + 1 + len(following.split()[0]) > TEXT_WIDTH, (line, following)


def test_the_chat_help_reads_as_one_paragraph() -> None:
    text = " ".join(_description(["chat"]))
    assert "Alt-Enter (or Esc then Enter) starts a new line" in text
    assert "Ctrl-C stops a running turn, Ctrl-D quits." in text
