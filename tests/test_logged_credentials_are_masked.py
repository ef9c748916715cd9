"""A URL's credentials quoted by an exception or an error are masked on every line logged."""

from __future__ import annotations

import logging

import pytest

from aptix.log_setup import JsonLinesFormatter, PlainFormatter
from aptix.logger import StdlibAdminLogger

URL = "postgresql://admin:S3cr3tPass@db.internal/reports?sslpassword=HUNTER2"


def _raised() -> ConnectionError:
    try:
        raise ConnectionError(f"could not reach {URL} for q1")
    except ConnectionError as exc:
        return exc


@pytest.mark.parametrize("formatter", [PlainFormatter(), JsonLinesFormatter()])
def test_a_tools_exception_is_masked_in_its_message_and_traceback(
    caplog: pytest.LogCaptureFixture, formatter: logging.Formatter
) -> None:
    caplog.set_level(logging.ERROR, logger="aptix")
    StdlibAdminLogger().add_exception("[fetch_ExecuteAsync__Exception]", _raised())
    [record] = caplog.records
    text = formatter.format(record)
    assert "S3cr3tPass" not in text
    assert "HUNTER2" not in text
    assert "postgresql://***@db.internal/reports?sslpassword=***" in text
    assert "Traceback" in text  # the traceback is still there, only masked


@pytest.mark.parametrize("formatter", [PlainFormatter(), JsonLinesFormatter()])
def test_a_handled_error_is_masked_too(
    caplog: pytest.LogCaptureFixture, formatter: logging.Formatter
) -> None:
    caplog.set_level(logging.ERROR, logger="aptix")
    StdlibAdminLogger().add_error("[registry]", f"Tool 'x' could not be built: no db at {URL}")
    [record] = caplog.records
    text = formatter.format(record)
    assert "S3cr3tPass" not in text
    assert "postgresql://***@db.internal" in text


def test_a_command_error_line_is_masked(capsys: pytest.CaptureFixture[str]) -> None:
    import typer

    from aptix.cli.output import fail

    with pytest.raises(typer.Exit):
        fail(f"Tool 'ctor' could not be built: RuntimeError: no db at {URL}", 2)
    err = capsys.readouterr().err
    assert "S3cr3tPass" not in err
    assert "postgresql://***@db.internal" in err
