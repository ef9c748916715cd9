"""Outside strings reach the terminal as text: never Rich markup, never emoji codes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from aptix.cli import output
from aptix.cli.main import app

runner = CliRunner()

HOSTILE = ["[/x]", "[bold]", "list[str]", "[the docs](https://x)", ":smile:", "[red]x[/red]"]


@pytest.fixture(autouse=True)
def _isolated_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("APTIX_CONFIG_FILE", raising=False)
    # Wide enough that no table cell wraps, so each string can be found whole.
    monkeypatch.setattr(output.console, "_width", 240)


def _capture() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=300, markup=False, emoji=False), buffer


@pytest.mark.parametrize("hostile", HOSTILE)
def test_say_prints_hostile_strings_byte_for_byte(hostile: str) -> None:
    console, buffer = _capture()
    output.say(("agent>", "bold green"), " ", hostile, (hostile, "bold"), to=console)
    assert buffer.getvalue() == f"agent> {hostile}{hostile}\n"


@pytest.mark.parametrize("hostile", HOSTILE)
def test_table_cells_and_titles_are_text(hostile: str) -> None:
    console, buffer = _capture()
    table = output.new_table(hostile, "id", hostile)
    output.add_row(table, hostile, None)
    console.print(table)
    assert buffer.getvalue().count(hostile) == 3


def test_fail_keeps_the_message_on_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    console, buffer = _capture()
    monkeypatch.setattr(output, "err_console", console)
    with pytest.raises(typer.Exit) as exited:
        output.fail("bad [/x] value\nin line 2", code=2)
    assert exited.value.exit_code == 2
    assert buffer.getvalue() == "error: bad [/x] value in line 2\n"


@pytest.mark.parametrize("title", HOSTILE)
def test_session_titles_survive_create_list_and_show(title: str) -> None:
    created = runner.invoke(app, ["sessions", "create", "--title", title])
    assert created.exit_code == 0, created.output
    session_id = created.stdout.split()[2]
    listed = runner.invoke(app, ["sessions", "list"])
    assert listed.exit_code == 0, listed.output
    assert title in listed.stdout
    shown = runner.invoke(app, ["sessions", "show", session_id])
    assert shown.exit_code == 0, shown.output
    assert f"title: {title}" in shown.stdout
    as_json = runner.invoke(app, ["sessions", "list", "--json"])
    assert json.loads(as_json.stdout)[0]["title"] == title


def test_yaml_error_messages_keep_the_part_that_explains_them(tmp_path: Path) -> None:
    folder = tmp_path / "wf"
    folder.mkdir()
    (folder / "bad.yaml").write_text("workflowId: x\ntitle: [unclosed\n")
    result = runner.invoke(app, ["workflows", "validate", str(folder)])
    assert result.exit_code == 1
    assert "expected ',' or ']', but got '<stream end>'" in result.stdout
    assert "title: [unclosed" in result.stdout


def test_unknown_tool_name_with_markup_is_reported_as_text() -> None:
    result = runner.invoke(app, ["tools", "schema", "[/x]"])
    assert result.exit_code == 1
    assert "Unknown tool '[/x]'" in result.stderr


def test_tool_results_with_markup_print_as_json_text() -> None:
    result = runner.invoke(
        app, ["tools", "call", "agent_hello_world", '{"name": "[bold]list[str]"}']
    )
    assert result.exit_code == 0, result.output
    assert "[bold]list[str]" in result.stdout


def test_inert_shows_every_control_and_escape_sequence_as_text() -> None:
    hostile = "a\x1b[2Jb\x1b]0;t\x07c\x9b1m\u202ed\u2066e\r\nf\tg\rh\x7f\x00"
    shown = output.inert(hostile)
    assert shown == "a␛[2Jb␛]0;t␇c<U+009B>1m<U+202E>d<U+2066>e\nf\tg␍h␡␀"
    assert not any(ord(c) < 0x20 and c not in "\n\t" for c in shown)


def test_say_tables_and_json_never_carry_controls(capsys: pytest.CaptureFixture[str]) -> None:
    with output.console.capture() as captured:
        output.say(("\x1b]0;pwned\x07", "bold"), " \u202eevil")
        table = output.new_table("t\x1b[2J", "col\x9b")
        output.add_row(table, "cell\x1b[31m")
        output.console.print(table)
    shown = captured.get()
    assert "␛]0;pwned␇ <U+202E>evil" in shown
    assert "t␛[2J" in shown
    assert "cell␛[31m" in shown
    assert "\x9b" not in shown
    output.print_json({"text": "\x1b[2J\x9b\u202e\u2069"})
    printed = capsys.readouterr().out
    assert json.loads(printed) == {"text": "\x1b[2J\x9b\u202e\u2069"}  # the same data
    assert not any(c in printed for c in "\x1b\x9b\u202e\u2069")
