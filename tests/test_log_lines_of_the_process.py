"""What the ``aptix`` process writes to stderr: every line in the log format (JSON with
``APTIX_LOG_JSON``), other libraries' and Python warnings too; lines bounded; the ids of a
turn on plain lines as on JSON ones, under the names traces use."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from aptix import log_setup
from aptix.logger import StdlibAdminLogger
from aptix.runtime import Runtime
from aptix.testing import ScriptedModel, call, reply


@pytest.fixture
def own_process() -> Iterator[None]:
    """This test's process is claimed as ``aptix``'s own, then given back as it was."""
    names = ("aptix", "asgi_correlation_id", "opentelemetry", "")
    saved = {n: (logging.getLogger(n).handlers[:], logging.getLogger(n).level) for n in names}
    log_setup.claim_process()
    try:
        yield
    finally:
        log_setup._Process.claimed = log_setup._Process.json_lines = False
        logging.captureWarnings(False)
        for name, (handlers, level) in saved.items():
            logging.getLogger(name).handlers[:] = handlers
            logging.getLogger(name).setLevel(level)


@pytest.mark.usefixtures("own_process")
def test_other_libraries_and_warnings_are_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    log_setup.configure_logging("WARNING", json_lines=True)
    logging.getLogger("somelib").warning("somelib says\n%s", "hi")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("a library's warning", UserWarning, stacklevel=1)
    lines = capsys.readouterr().err.splitlines()
    records = [json.loads(line) for line in lines]
    assert [(r["logger"], r["level"]) for r in records] == [
        ("somelib", "warning"),
        ("py.warnings", "warning"),
    ]
    assert records[0]["message"] == "somelib says\nhi"
    assert "UserWarning: a library's warning" in records[1]["message"]


@pytest.mark.usefixtures("own_process")
def test_a_command_error_is_a_json_line_when_logs_are_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import typer

    from aptix.cli.output import fail

    log_setup.configure_logging("CRITICAL", json_lines=True)  # an error line is never dropped
    with pytest.raises(typer.Exit):
        fail("it broke\nbadly", code=2)
    [line] = capsys.readouterr().err.splitlines()
    record = json.loads(line)
    assert (record["level"], record["logger"], record["message"]) == (
        "error",
        "aptix.cli",
        "it broke badly",
    )


@pytest.mark.parametrize(
    ("variables", "arguments", "said"),
    [
        ({"APTIX_API_KEYS": "nokey"}, [], "APTIX_API_KEYS"),
        ({}, ["--host", "0.0.0.0"], "Refusing to serve on 0.0.0.0"),
    ],
)
def test_serve_says_why_it_cannot_start_in_json(
    tmp_path: Path, variables: dict[str, str], arguments: list[str], said: str
) -> None:
    environment = {
        **os.environ,
        "APTIX_LOG_JSON": "true",
        "APTIX_DATA_DIR": str(tmp_path),
        "APTIX_LOAD_PLUGINS": "false",
        **variables,
    }
    environment.pop("APTIX_DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "aptix", "serve", "--port", "9", *arguments],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    records = [json.loads(line) for line in done.stderr.splitlines()]
    assert records[-1]["level"] == "error"
    assert said in records[-1]["message"]


def test_logged_text_is_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    logger = logging.getLogger("aptix.test.bounded")
    # Only this test's handler writes: a handler another test of the worker left on "aptix"
    # or the root (with a formatter of its own) would write the same records unbounded.
    logger.propagate = False
    for json_lines in (False, True):
        handler = logging.StreamHandler()
        handler.setFormatter(
            log_setup.JsonLinesFormatter() if json_lines else log_setup.PlainFormatter()
        )
        logger.addHandler(handler)
        try:
            try:
                raise RuntimeError("x" * 100_000)
            except RuntimeError as exc:
                StdlibAdminLogger(logger).add_exception("[t_ExecuteAsync__Exception]", exc)
            logger.error("%s", "y" * 100_000)
        finally:
            logger.removeHandler(handler)
        err = capsys.readouterr().err
        assert max(len(line) for line in err.splitlines()) < 8_000
        if json_lines:
            crashed, long = (json.loads(line) for line in err.splitlines())
            assert len(crashed["message"]) < 600
            assert max(len(line) for line in crashed["exception"].split("\n")) <= 4_096
            assert len(long["message"]) == 4_096


async def test_a_long_tool_name_from_the_model_is_cut_in_the_log(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel([reply("", call("N" * 100_000, {})), reply("done")])
    created = await runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    with caplog.at_level(logging.DEBUG, logger="aptix"):
        await runtime.reasoner(model).execute(
            session_id=created.result.id, org="acme", user="ann", instruction="go"
        )
    failures = [r for r in caplog.records if "[AgentReasoner_ToolCall]" in r.getMessage()]
    assert failures
    assert all(len(r.getMessage()) < 700 for r in failures)


@pytest.mark.parametrize("json_lines", [False, True])
def test_a_turns_lines_carry_its_session_and_turn_ids(
    capsys: pytest.CaptureFixture[str], json_lines: bool
) -> None:
    logger = logging.getLogger("aptix.test.ids")
    handler = logging.StreamHandler()
    handler.setFormatter(
        log_setup.JsonLinesFormatter() if json_lines else log_setup.PlainFormatter()
    )
    handler.addFilter(log_setup.LogContextFilter(None if json_lines else "-"))
    logger.addHandler(handler)
    try:
        with log_setup.log_ids("s-1", "t-1"):
            logger.warning("inside")
        logger.warning("outside")
    finally:
        logger.removeHandler(handler)
    inside, outside = capsys.readouterr().err.splitlines()
    if json_lines:
        record = json.loads(inside)
        assert (record["session_id"], record["turn_id"], record["conversation_id"]) == (
            "s-1",
            "t-1",
            "t-1",
        )
        assert json.loads(outside)["turn_id"] is None
    else:
        assert inside.endswith(" WARNING aptix.test.ids [-] session_id=s-1 turn_id=t-1 inside")
        assert outside.endswith(" WARNING aptix.test.ids [-] outside")


@pytest.mark.usefixtures("own_process")
def test_aptix_chat_sends_every_librarys_lines_to_its_log_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_setup.log_to_file(tmp_path / "data" / "chat.log")
    try:
        log_setup.configure_logging("INFO", json_lines=True)  # as the chat's runtime opens
        logging.getLogger("aptix.workflows").info("loading the matching model")  # start-up
        logging.getLogger("somelib").warning("not over the chat")
        logging.getLogger("opentelemetry.exporter").warning("transient error")  # APTIX_OTEL
    finally:
        log_setup.log_to_file(None)
        log_setup.configure_logging("WARNING")  # closes nothing of the test's, writes stderr
    assert capsys.readouterr().err == ""
    lines = (tmp_path / "data" / "chat.log").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["message"] for line in lines] == [
        "loading the matching model",
        "not over the chat",
        "transient error",
    ]
