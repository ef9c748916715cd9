from __future__ import annotations

import json
import logging
import logging.config
from collections.abc import Iterator

import pytest

from aptix.log_setup import JsonLinesFormatter
from aptix.logger import LogLevel, StdlibAdminLogger


def test_records_carry_tag_and_fields_as_json_lines(caplog: pytest.LogCaptureFixture) -> None:
    log = StdlibAdminLogger(logging.getLogger("aptix.test"))
    with caplog.at_level(logging.DEBUG, logger="aptix.test"):
        log.add_error("[t_Tag]", "went wrong", ("SessionId", "s1"))
        log.add_custom_event(LogLevel.WARNING, "[t_Event]", "careful", ("ConversationId", "c1"))
        try:
            raise ValueError("bad value")
        except ValueError as exc:
            log.add_exception("[t_ExecuteAsync__Exception]", exc, ("SessionId", "s2"))
        log.trace("tracing", ("k", "v"))
    lines = [json.loads(JsonLinesFormatter().format(r)) for r in caplog.records]
    assert [line["level"] for line in lines] == ["error", "warning", "error", "debug"]
    assert lines[0]["tag"] == "[t_Tag]"
    assert lines[0]["SessionId"] == "s1"
    assert lines[1]["ConversationId"] == "c1"
    assert lines[2]["tag"] == "[t_ExecuteAsync__Exception]"
    assert "ValueError: bad value" in lines[2]["exception"]
    assert lines[3]["message"] == "tracing"


@pytest.fixture
def restore_loggers() -> Iterator[None]:
    names = ("aptix", "asgi_correlation_id", "uvicorn", "uvicorn.error", "uvicorn.access")
    saved = {n: (logging.getLogger(n).handlers[:], logging.getLogger(n).level) for n in names}
    yield
    for name, (handlers, level) in saved.items():
        logging.getLogger(name).handlers[:] = handlers
        logging.getLogger(name).setLevel(level)


@pytest.mark.usefixtures("restore_loggers")
def test_log_lines_carry_the_ids_bound_around_them(capsys: pytest.CaptureFixture[str]) -> None:
    from asgi_correlation_id import correlation_id

    from aptix.log_setup import log_ids, logging_config

    # As `aptix serve` configures it: uvicorn applies the config with dictConfig.
    logging.config.dictConfig(logging_config("INFO", json_lines=True))
    log = StdlibAdminLogger(logging.getLogger("aptix.test"))
    token = correlation_id.set("req-7")
    try:
        with log_ids("s-1", "c-1"):
            log.add_custom_event(LogLevel.INFO, "[t_In]", "inside")
        log.add_custom_event(LogLevel.INFO, "[t_Out]", "outside", ("SessionId", "s-2"))
    finally:
        correlation_id.reset(token)
    logging.getLogger("uvicorn.access").info(
        '%s - "%s %s HTTP/%s" %d', "1.2.3.4:5", "GET", "/x", "1.1", 204
    )
    inside, outside, access = (json.loads(line) for line in capsys.readouterr().err.splitlines())
    assert (inside["request_id"], inside["session_id"], inside["conversation_id"]) == (
        "req-7",
        "s-1",
        "c-1",
    )
    assert (outside["request_id"], outside["session_id"], outside["conversation_id"]) == (
        "req-7",
        "s-2",
        None,
    )
    assert (access["method"], access["path"], access["status"], access["request_id"]) == (
        "GET",
        "/x",
        204,
        None,
    )


@pytest.mark.usefixtures("restore_loggers")
def test_plain_lines_show_the_request_id_or_a_dash(capsys: pytest.CaptureFixture[str]) -> None:
    from aptix.log_setup import configure_logging

    configure_logging("INFO")
    logging.getLogger("aptix.test").info("hello [bold]")
    [line] = capsys.readouterr().err.splitlines()
    assert line.endswith(" INFO aptix.test [-] hello [bold]")


def test_a_record_no_filter_saw_still_formats() -> None:
    from aptix.log_setup import PlainFormatter

    record = logging.LogRecord("aptix.x", logging.ERROR, __file__, 1, "boom", None, None)
    assert PlainFormatter().format(record).endswith(" ERROR aptix.x [-] boom")


def test_configure_logging_leaves_uvicorn_to_whoever_runs_it() -> None:
    # An application running uvicorn with access_log=False must not get an access log back
    # when it opens a runtime (uvicorn logs access whenever its logger has handlers).
    from aptix.log_setup import configure_logging

    access = logging.getLogger("uvicorn.access")
    saved = access.handlers[:]
    access.handlers[:] = []
    try:
        configure_logging("INFO")
        assert access.handlers == []
        assert logging.getLogger("aptix").handlers
    finally:
        access.handlers[:] = saved


FORGED = "agent_x\n2026-01-01 00:00:00,000 ERROR aptix [req-1] forged\r\x1b[2J\x85\u2028end"


@pytest.mark.parametrize("json_lines", [False, True])
@pytest.mark.usefixtures("restore_loggers")
def test_outside_text_cannot_forge_a_log_line(
    capsys: pytest.CaptureFixture[str], json_lines: bool
) -> None:
    from aptix.log_setup import logging_config

    logging.config.dictConfig(logging_config("INFO", json_lines=json_lines))
    log = StdlibAdminLogger(logging.getLogger("aptix.test"))
    log.add_custom_event(
        LogLevel.WARNING, "[agent_ToolNotFound]", f"Unknown tool {FORGED}", ("Tool", FORGED)
    )
    try:
        raise ValueError(FORGED)
    except ValueError as exc:
        log.add_exception("[t_ExecuteAsync__Exception]", exc, ("Tool", FORGED))
    logging.getLogger("uvicorn.access").info(
        '%s - "%s %s HTTP/%s" %d', "1.2.3.4:5", "GET", "/x\nforged", "1.1", 204
    )
    err = capsys.readouterr().err
    for control in ("\r", "\x1b", "\x85", "\u2028"):
        assert control not in err
    lines = err.split("\n")[:-1]
    if json_lines:
        records = [json.loads(line) for line in lines]
        assert len(records) == 3
        assert records[2]["path"] == "/x\nforged"
        assert records[0]["message"] == f"[agent_ToolNotFound] Unknown tool {FORGED}"
        assert records[0]["Tool"] == FORGED
        assert FORGED in records[1]["exception"]
    else:
        records = [line for line in lines if not line.startswith("  ")]
        assert len(records) == 3, err
        assert "Unknown tool agent_x\\n2026-01-01" in records[0]
        assert "\\x1b[2J\\x85\\u2028end" in records[0]
        assert all(line.startswith("2") for line in records)


BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


@pytest.mark.parametrize("json_lines", [False, True])
@pytest.mark.usefixtures("restore_loggers")
def test_bidi_controls_in_logged_text_are_escaped(
    capsys: pytest.CaptureFixture[str], json_lines: bool
) -> None:
    from aptix.log_setup import logging_config

    logging.config.dictConfig(logging_config("INFO", json_lines=json_lines))
    tool = f"evil{BIDI}_tool"
    StdlibAdminLogger(logging.getLogger("aptix.test")).add_custom_event(
        LogLevel.WARNING, "[agent_ToolNotFound]", f"Unknown tool {tool}", ("Tool", tool)
    )
    err = capsys.readouterr().err
    assert not any(c in err for c in BIDI), ascii(err)
    escaped = "".join(f"\\u{ord(c):04x}" for c in BIDI)
    assert f"evil{escaped}_tool" in err
    if json_lines:
        record = json.loads(err)
        assert record["Tool"] == tool
        assert record["message"] == f"[agent_ToolNotFound] Unknown tool {tool}"


TAGS = "".join(chr(0xE0000 + ord(c)) for c in " and")
#: Kept as the CLI and the console keep them: an emoji ZWJ sequence, a Persian ZWNJ, a flag.
KEPT = (
    "\U0001f469\u200d\U0001f4bb \u0645\u06cc\u200c\u062e"
    " \U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"
)


@pytest.mark.parametrize("json_lines", [False, True])
@pytest.mark.usefixtures("restore_loggers")
def test_invisible_format_characters_in_logged_text_are_escaped(
    capsys: pytest.CaptureFixture[str], json_lines: bool
) -> None:
    """Review r3 F3: ``pro<ZWSP>d`` read ``prod`` in a log, and tag characters hid words."""
    from aptix.log_setup import logging_config

    logging.config.dictConfig(logging_config("INFO", json_lines=json_lines))
    text = f"deleted pro\u200bd \u2060x \ufeffy \u00adz dev{TAGS} {KEPT}"
    try:
        raise RuntimeError(text)
    except RuntimeError as exc:
        StdlibAdminLogger(logging.getLogger("aptix.test")).add_exception(
            "[t_ExecuteAsync__Exception]", exc, ("Tool", text)
        )
    err = capsys.readouterr().err
    hidden = "\u200b\u2060\ufeff\u00ad" + TAGS
    assert not any(c in err for c in hidden), ascii(err)
    assert KEPT in err  # legitimate text reads as it does in the CLI and the console
    if json_lines:
        record = json.loads(err)
        assert record["Tool"] == text
        assert record["message"].endswith(text)
        assert text in record["exception"]
    else:
        escaped = "deleted pro\\u200bd \\u2060x \\ufeffy \\xadz dev"
        escaped += "\\U000e0020\\U000e0061\\U000e006e\\U000e0064"
        assert err.count(escaped) == 2  # the message and the traceback


def test_logs_escape_only_unprintable_characters() -> None:
    """Printable text is logged as it is without a substitution: none of it is ever escaped."""
    from aptix.log_setup import _CONTROLS

    escaped = [c for c in range(0x110000) if _CONTROLS.fullmatch(chr(c))]
    assert {0x200B, 0xE0061, 0x2028} <= set(escaped)
    assert [hex(c) for c in escaped if chr(c).isprintable()] == []
