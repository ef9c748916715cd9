"""Outside strings reach the terminal as text: never Rich markup, never emoji codes."""

from __future__ import annotations

import io
import json
import unicodedata
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
    session_id = created.stdout.strip()  # the id alone (review r2 F6)
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


TAGS = "".join(chr(0xE0000 + ord(c)) for c in " and also drop prod")
#: Cf characters drawn as signs (Prepended_Concatenation_Mark): nothing is hidden by them.
DRAWN = {*range(0x0600, 0x0606), 0x06DD, 0x070F, 0x0890, 0x0891, 0x08E2, 0x110BD, 0x110CD}


def test_inert_spells_out_invisible_format_characters() -> None:
    """Review r7 F3: tag characters and zero-width ones reached the terminal unmarked."""
    hidden = "dev" + TAGS + "\u200b\u2060\u00ad"
    assert output.inert(hidden) == "dev" + "".join(
        f"<U+{ord(c):04X}>" for c in TAGS + "\u200b\u2060\u00ad"
    )
    assert output.inert("pro\u200cd pro\u200dd \ufeffx \u2062y") == (
        "pro<U+200C>d pro<U+200D>d <U+FEFF>x <U+2062>y"
    )
    # Tags are a flag's only after a black flag, and only a few letters (not a sentence).
    sentence = "\U0001f3f4" + TAGS + "\U000e007f"
    assert output.inert(sentence) == "\U0001f3f4" + "".join(
        f"<U+{ord(c):04X}>" for c in TAGS + "\U000e007f"
    )
    # A joiner that joins nothing joinable.
    assert output.inert("\u200d\U0001f4bb a\u200db \u0645\u200c x") == (
        "<U+200D>\U0001f4bb a<U+200D>b \u0645<U+200C> x"
    )


@pytest.mark.parametrize(
    "text",
    [
        "\U0001f469\u200d\U0001f4bb \U0001f3f3\ufe0f\u200d\U0001f308",  # emoji ZWJ sequences
        "\U0001f9d4\U0001f3fb\u200d\u2642\ufe0f",  # with a skin tone and a sign
        "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",  # Scotland
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian: ZWNJ between letters
        "\u0915\u094d\u200d\u0937",  # Devanagari: ZWJ after a virama
        "\u0d05\u0d35\u0d28\u0d4d\u200d \u0d35\u0d28\u0d4d\u0d28\u0d41.",  # Malayalam chillu
        "\u0d28\u0d4d\u200d.",  # ...before a full stop (review s1 F2)
        "\u1828\u1822\u180e\u1821",  # Mongolian vowel separator
        "\u0600\u0661\u0662 \u06dd",  # prepended concatenation marks: drawn signs
    ],
)
def test_inert_keeps_the_joiners_and_tags_legitimate_text_needs(text: str) -> None:
    assert output.inert(text) == text


def test_every_invisible_format_character_is_spelled_out() -> None:
    invisible = [
        c for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf" and c not in DRAWN
    ]
    for c in invisible:
        assert output.inert(f"a{chr(c)}b") == f"a<U+{c:04X}>b", hex(c)


def test_print_json_escapes_invisible_characters(capsys: pytest.CaptureFixture[str]) -> None:
    data = {"target": "dev" + TAGS + "\u200b\ufeff", "ok": "\U0001f469\u200d\U0001f4bb"}
    output.print_json(data)
    printed = capsys.readouterr().out
    assert json.loads(printed) == data  # the same data
    assert '"dev\\udb40\\udc20\\udb40\\udc61' in printed  # beyond the BMP: a surrogate pair
    assert "\\u200b\\ufeff" in printed
    assert "\U0001f469\u200d\U0001f4bb" in printed  # an emoji sequence stays one picture
    assert not any(0xE0000 <= ord(c) <= 0xE007F or c in "\u200b\ufeff" for c in printed)


def test_line_and_paragraph_separators_are_spelled_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Review r3 F2: a terminal draws nothing for U+2028 / U+2029 ("lineFORGED")."""
    assert output.inert("line\u2028FORGED\u2029x\u0085y") == (
        "line<U+2028>FORGED<U+2029>x<U+0085>y"
    )
    data = {"title": "pay\u2028ee\u2029x"}
    output.print_json(data)
    printed = capsys.readouterr().out
    assert json.loads(printed) == data  # the same data
    assert '"pay\\u2028ee\\u2029x"' in printed
    assert not any(c in printed for c in "\u2028\u2029")


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
