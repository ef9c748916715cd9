from __future__ import annotations

import json
import logging

import pytest

from aptix.logger import JsonLinesFormatter, LogLevel, StdlibAdminLogger


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
