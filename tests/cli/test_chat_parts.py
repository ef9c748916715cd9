"""The parts of ``aptix chat`` in-process: commands, completion, tool lines, the text view."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from rich.console import Console

from aptix.cli import output
from aptix.cli.chat_commands import COMMANDS, ChatState, open_session, run_command
from aptix.cli.chat_input import SlashCompleter
from aptix.cli.chat_view import InertMarkdown, TurnView, tool_line
from aptix.reasoner import TurnEvent
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings

HOSTILE = "[/x] [bold] list[str] [the docs](https://x) :smile:"


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output.console, "_width", 240)


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    async with open_runtime(AptixSettings(data_dir=tmp_path, semantic_matching=False)) as rt:
        yield rt


async def _said(runtime: Runtime, state: ChatState, line: str) -> tuple[bool, str]:
    with output.console.capture() as captured:
        done = await run_command(runtime, state, line)
    return done, captured.get()


def _completions(text: str) -> list[str]:
    completer = SlashCompleter(COMMANDS, lambda: ("general", "calculation"))
    found = completer.get_completions(Document(text), CompleteEvent(completion_requested=True))
    return [text[: len(text) + c.start_position] + c.text for c in found]


def test_tab_completes_commands_and_mode_keys() -> None:
    assert _completions("/mo") == ["/mode", "/modes"]
    assert _completions("/") == list(COMMANDS)
    assert _completions("/mode ca") == ["/mode calculation"]
    assert _completions("/new ") == ["/new general", "/new calculation"]
    assert _completions("hello /mo") == []
    assert _completions("/workflows x") == []


async def test_mode_without_an_argument_lists_the_modes_with_the_current_one_marked(
    runtime: Runtime,
) -> None:
    state = ChatState(await open_session(runtime, None, "calculation"))
    for line in ("/mode", "/modes"):
        done, shown = await _said(runtime, state, line)
        assert not done
        marked = [row for row in shown.splitlines() if row.startswith("* ")]
        assert [row.split()[1] for row in marked] == ["calculation"]
        assert "  general — " in shown
        assert "Unknown mode" not in shown


async def test_mode_switches_and_an_unknown_hostile_key_is_shown_as_text(
    runtime: Runtime,
) -> None:
    state = ChatState(await open_session(runtime, None, None))
    _, shown = await _said(runtime, state, "/mode calculation")
    assert shown == "Mode is now calculation.\n"
    _, shown = await _said(runtime, state, "/mode [/x]")
    assert "'[/x]'" in shown
    _, shown = await _said(runtime, state, "/modes")
    assert "* calculation — " in shown


async def test_new_prints_the_new_session_id_and_chats_there(runtime: Runtime) -> None:
    state = ChatState(await open_session(runtime, None, None))
    first = state.session_id
    _, shown = await _said(runtime, state, "/new calculation")
    assert state.session_id != first
    assert f"New session {state.session_id}." in shown
    session = await runtime.services.sessions.get_session(state.session_id, "local")
    assert session is not None
    assert session.mode == "calculation"


async def test_quit_ends_and_unknown_commands_are_named_with_a_suggestion(
    runtime: Runtime,
) -> None:
    state = ChatState(await open_session(runtime, None, None))
    assert (await _said(runtime, state, "/quit"))[0]
    assert (await _said(runtime, state, "/exit"))[0]
    done, shown = await _said(runtime, state, "/nonsense")
    assert not done
    assert shown.startswith("Unknown command /nonsense. Commands: /mode, /modes")
    _, shown = await _said(runtime, state, "/workflow")
    assert shown.startswith("Unknown command /workflow. Did you mean /workflows?")
    _, shown = await _said(runtime, state, "/help")
    assert shown.startswith("Commands: /mode, /modes")
    _, shown = await _said(runtime, state, "/details")
    assert state.details
    assert "tool details on" in shown


def _render(renderable: object, width: int) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=width, markup=False, emoji=False).print(renderable)
    return buffer.getvalue()


FINISHED = {
    "name": "agent_calculator",
    "argumentsJson": json.dumps({"expression": "19.99 * 3", "note": HOSTILE}),
    "resultJson": json.dumps({"value": 59.97, "echo": HOSTILE}),
    "wasExecuted": True,
    "requiresClientExecution": False,
}


def test_a_tool_call_is_one_line_cut_to_the_screen() -> None:
    shown = _render(tool_line(FINISHED, details=False), 60)
    assert shown.count("\n") == 1
    assert shown.startswith('  ⚙ agent_calculator({"expression": "19.99 * 3", "note": "[')
    assert shown.rstrip().endswith("…")
    wide = _render(tool_line(FINISHED, details=False), 400)
    assert HOSTILE in wide.split("→")[0]
    assert HOSTILE in wide.split("→")[1]


def test_tool_details_show_the_arguments_and_result_in_full() -> None:
    shown = _render(tool_line(FINISHED, details=True), 100)
    assert f'"note": "{HOSTILE}"' in shown
    assert '"value": 59.97' in shown
    failed = {**FINISHED, "wasExecuted": False, "errorMessage": HOSTILE}
    assert f"error: {HOSTILE}" in _render(tool_line(failed, details=False), 400)


async def test_streamed_text_is_printed_as_it_comes_on_a_plain_terminal() -> None:
    view = TurnView()
    view.open()
    with output.console.capture() as captured:
        for piece in ("Use ", "list[str] ", "and [bold]", " as-is."):
            await view.on_event(TurnEvent("text_delta", {"delta": piece}))
        await view.on_event(TurnEvent("text", {"text": "Use list[str] and [bold] as-is."}))
        view.close()
    assert captured.get() == "agent> Use list[str] and [bold] as-is.\n"


async def test_text_cut_short_by_a_cancel_stays_on_screen() -> None:
    view = TurnView()
    view.open()
    with output.console.capture() as captured:
        await view.on_event(TurnEvent("text_delta", {"delta": "[/x] half"}))
        view.close()
    assert captured.get() == "agent> [/x] half\n"


async def test_a_crlf_split_between_two_pieces_is_one_newline_on_a_plain_terminal() -> None:
    view = TurnView()
    view.open()
    with output.console.capture() as captured:
        for piece in ("one\r", "\ntwo\r", "three\r"):
            await view.on_event(TurnEvent("text_delta", {"delta": piece}))
        await view.on_event(TurnEvent("text", {"text": "one\r\ntwo\rthree\r"}))
        view.close()
    assert captured.get() == "agent> one\n       two␍three␍\n"  # under the label (review r2 F2)


ENTITIES = """# Title &#x202E;h

Text &#x202E;p &rlm;m &#x2067;i &#x061C;a &#x200E;l &#x202A;e *&#x202D;em* **&#8238;st**

| a | b |
|---|---|
| &#x202E;t | &#x2066;u |

> quote &#x202B;q

- item &#x202C;x
"""


def test_final_markdown_shows_entity_encoded_bidi_controls_as_code_points() -> None:
    shown = _render(InertMarkdown(ENTITIES), 100)
    assert not any(
        c in shown for c in "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067"
    )
    for visible in (
        "Title <U+202E>h",
        "Text <U+202E>p <U+200F>m <U+2067>i <U+061C>a <U+200E>l <U+202A>e <U+202D>em <U+202E>st",
        "<U+202E>t",
        "<U+2066>u",
        "quote <U+202B>q",
        "item <U+202C>x",
    ):
        assert visible in shown, shown


def test_final_markdown_keeps_html_as_written_and_shows_an_image_address() -> None:
    rendered = _render(
        InertMarkdown(
            "In Java use List<String> and Vec<u8> in Rust. <!-- c -->\n\n"
            "<div>\nHidden paragraph\n</div>\n\n"
            "See ![the chart](http://evil.example/x.png) here."
        ),
        100,
    )
    shown = "\n".join(row.rstrip() for row in rendered.splitlines())
    assert "In Java use List<String> and Vec<u8> in Rust. <!-- c -->" in shown
    assert "<div>\nHidden paragraph\n</div>" in shown
    assert "See 🌆 the chart (http://evil.example/x.png) here." in shown


def test_a_markdown_table_folds_long_words_instead_of_cutting_them() -> None:
    url = "https://example.com/" + "".join(f"seg{i:03d}" for i in range(40)) + "/END"
    ident = "ID" + "".join(f"{i:02d}" for i in range(60)) + "ZZ"
    table = f"| name | value |\n|---|---|\n| url | {url} |\n| id | see {ident} |\n"
    for width in (120, 60, 24):
        shown = _render(InertMarkdown(table), width)
        assert "…" not in shown
        cells = "".join(shown.split())  # the folded rows read back as one
        assert url in cells, shown
        assert ident in cells, shown


async def test_a_named_session_shows_its_last_turns_first(runtime: Runtime) -> None:
    from aptix.testing import ScriptedModel, reply

    state = ChatState(await open_session(runtime, None, None))
    reasoner = runtime.reasoner(ScriptedModel.of(reply("An \x1b[2J answer.")))
    prepared = await reasoner.prepare(
        session_id=state.session_id, org="local", user="local", instruction="First question"
    )
    await reasoner.run(prepared)
    with output.console.capture() as captured:
        assert await open_session(runtime, state.session_id, None) == state.session_id
    shown = captured.get()
    assert "Last 1 turn(s) of this session:" in shown
    assert "you> First question" in shown
    assert "agent> An ␛[2J answer." in shown
    with output.console.capture() as captured:
        assert await open_session(runtime, None, None, resume_last=True) == state.session_id
    assert "you> First question" in captured.get()


async def test_another_users_session_of_the_org_is_unknown_to_the_chat(runtime: Runtime) -> None:
    from aptix.errors import AptixError
    from aptix.testing import ScriptedModel, reply

    created = await runtime.services.sessions.create_session(org="local", user="bob")
    assert created.result is not None
    bobs = created.result.id
    reasoner = runtime.reasoner(ScriptedModel.of(reply("Bob's answer.")))
    prepared = await reasoner.prepare(
        session_id=bobs, org="local", user="bob", instruction="bob private note"
    )
    await reasoner.run(prepared)
    with output.console.capture() as captured, pytest.raises(AptixError) as refused:
        await open_session(runtime, bobs, None)
    assert str(refused.value) == f"Unknown session '{bobs}'."
    assert "bob private note" not in captured.get()  # his turns are not shown
    with output.console.capture():
        mine = await open_session(runtime, None, None, resume_last=True)
    assert mine != bobs  # --continue starts the chat's own session, never his
    session = await runtime.services.sessions.get_session(bobs, "local")
    assert session is not None
    assert (session.mode, session.mode_history) == (created.result.mode, ())


async def test_details_honours_on_and_off_and_commands_refuse_words_they_do_not_take(
    runtime: Runtime,
) -> None:
    state = ChatState(await open_session(runtime, None, None))
    _, shown = await _said(runtime, state, "/details off")
    assert (state.details, shown) == (False, "tool details off\n")  # off stays off
    _, shown = await _said(runtime, state, "/details on")
    assert (state.details, shown) == (True, "tool details on\n")
    _, shown = await _said(runtime, state, "/details ON")
    assert state.details  # set, not switched, in any casing
    _, shown = await _said(runtime, state, "/details")
    assert (state.details, shown) == (False, "tool details off\n")
    _, shown = await _said(runtime, state, "/details loud")
    assert (state.details, shown) == (False, "/details takes on, off or nothing (to switch).\n")
    for line in ("/workflows nonsense", "/modes x", "/help me", "/quit now", "/exit please"):
        done, shown = await _said(runtime, state, line)
        assert not done, line
        command = line.split()[0]
        assert shown.startswith(f"{command} takes no argument. Commands: /mode"), shown
        assert "author_workflow" not in shown  # the list did not run with the word dropped


async def test_an_empty_session_id_is_an_unknown_session_not_a_new_one(runtime: Runtime) -> None:
    from aptix.errors import AptixError

    with pytest.raises(AptixError) as refused:
        await open_session(runtime, "", None)
    assert str(refused.value) == "Unknown session ''."
    assert await runtime.services.sessions.list_sessions("local", "local") == []
