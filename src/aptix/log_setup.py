"""How log lines look and what they carry: one configuration for Aptix's and uvicorn's loggers.

Every record gets ``request_id`` (from the ``X-Request-ID`` header when it is made of safe
characters, or one made up, by ``asgi-correlation-id``'s middleware) and ``session_id``,
``turn_id``, ``conversation_id`` (the turn's id, as tools see it) and ``org`` where they are
known (bound with :func:`log_ids` around a turn or a tool call). Plain text by default; with
``json_lines`` every line, uvicorn's access and error lines included, is one JSON object
written by ``python-json-logger``.

In Aptix's own process (the ``aptix`` command, :func:`claim_process`) the root logger writes
in the same format too, so other libraries' records and Python warnings
(:func:`logging.captureWarnings`) do, and so do the command's own error lines
(:func:`stderr_line`).

Every text field of a line, and every line of a traceback, has the credentials of the URLs
in it masked (:func:`aptix.urls.mask_credentials`: a tool's exception often quotes its
connection URL) and is cut to :data:`FIELD_LIMIT` characters; outside text is cut shorter
where it is logged (:data:`aptix.logger.OUTSIDE_TEXT_LIMIT`).

Logged text comes from outside (tool names a model chose, request paths), so no field can
start a line of its own: plain text shows control characters escaped (a newline as a
backslash and ``n``, ESC as ``x1b``, a bidirectional control such as U+202E as ``u202e``)
and indents the lines of a traceback; JSON escapes them inside its strings (the line separator
U+2028 and the bidirectional controls too). Invisible format characters are escaped alike (a
zero-width space as ``u200b``, a tag character as ``U000e0061``), so ``prod`` with a zero-width
space inside cannot pass for ``prod``; the joiners and tags legitimate text needs stay, as in
the CLI and the console (:mod:`aptix.invisible`).
"""

from __future__ import annotations

import logging
import logging.config
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TextIO

from asgi_correlation_id.context import correlation_id
from pythonjsonlogger.json import JsonFormatter

from aptix import invisible
from aptix.logger import bounded
from aptix.nul import without_surrogates
from aptix.urls import mask_credentials

__all__ = [
    "FIELD_LIMIT",
    "JsonLinesFormatter",
    "LogContextFilter",
    "PlainFormatter",
    "claim_process",
    "configure_logging",
    "escape_controls",
    "log_ids",
    "logging_config",
    "process_handler",
    "stderr_line",
]

_ids: ContextVar[tuple[str | None, str | None, str | None]] = ContextVar(
    "aptix_log_ids", default=(None, None, None)
)

#: ``ids`` is `` session_id=… turn_id=… org=…`` for a record of a turn or a tool call, else
#: empty. The request id is the caller's only when it is made of safe characters
#: (:data:`aptix.api.metrics.SAFE_REQUEST_ID`), so it cannot pose as these fields.
PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s]%(ids)s %(message)s"

#: Most characters of any text field of a log line (the message, a key/value pair, the tag)
#: and of each line of a traceback, as OpenTelemetry's attribute limit bounds a span's.
FIELD_LIMIT = 4096

#: Python warnings and other libraries' records through the root logger: WARNING and above.
ROOT_LEVEL = "WARNING"


class _Process:
    """What :func:`claim_process` and the last :func:`configure_logging` of it chose."""

    claimed = False
    json_lines = False
    #: Where every configured logger writes instead of stderr (:func:`log_to_file`).
    log_file: Path | None = None


# C0, DEL and C1 controls, and what the CLI and the console spell out (aptix.invisible): the
# Unicode line and paragraph separators, the bidirectional controls, which reorder what a
# terminal shows around them ("Trojan Source"), and the invisible format characters, which
# hide text ("pro\u200bd" reads "prod"). Group 1 is a sequence legitimate text keeps, as they
# keep it (an emoji ZWJ sequence, a Persian ZWNJ, a flag's tags).
_CONTROLS = re.compile(
    f"({invisible.KEPT})"
    f"|[\x00-\x1f\x7f-\x9f{invisible.SEPARATORS}{invisible.BIDI}{invisible.FORMAT}]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_controls(text: str) -> str:
    """``text`` with every control and invisible character shown as an escape, on one line."""
    return _escaped(text, _plain_escape)


def _escaped(text: str, escape: Callable[[re.Match[str]], str]) -> str:
    # Every character escaped is unprintable (Cc, Cf, Zl, Zp), so printable text, most of it,
    # is left as it is after one quick scan: the kept sequences' lookbehinds, tried at every
    # character, make the substitution 30 times slower than the scan.
    return text if text.isprintable() else _CONTROLS.sub(escape, text)


def _plain_escape(match: re.Match[str]) -> str:
    if match[1]:
        return match[1]
    code = ord(match[0])
    if named := _NAMED.get(match[0]):
        return named
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"  # as Python writes them


#: uvicorn's access lines: client, method, path, HTTP version, status (its format's args).
_ACCESS_FIELDS = ("client", "method", "path", "http_version", "status")


@contextmanager
def log_ids(
    session_id: str | None, conversation_id: str | None = None, org: str | None = None
) -> Iterator[None]:
    """Mark every record logged inside the block with these session and conversation ids.

    ``org``: the org whose turn or call it is (its name, never a key), so that an operator
    can tell orgs apart.
    """
    token = _ids.set((session_id or None, conversation_id or None, org or None))
    try:
        yield
    finally:
        _ids.reset(token)


class LogContextFilter(logging.Filter):
    """Adds ``request_id``, ``session_id``, ``turn_id``, ``conversation_id`` and ``org``.

    ``conversation_id`` is the turn's id (what a tool's context calls the conversation), so
    it equals ``turn_id``: the name traces use for it is ``aptix.turn.id``. An id that is not
    known is ``missing`` (None for JSON, ``-`` in plain text).
    """

    def __init__(self, missing: str | None = None) -> None:
        super().__init__()
        self.missing = missing

    def filter(self, record: logging.LogRecord) -> bool:
        """Annotate the record (never drops it)."""
        session_id, conversation_id, org = _ids.get()
        fields = getattr(record, "aptix_fields", None) or {}
        record.request_id = correlation_id.get() or self.missing
        record.session_id = session_id or fields.get("SessionId") or self.missing
        turn_id = conversation_id or fields.get("ConversationId") or self.missing
        record.conversation_id = record.turn_id = turn_id
        record.org = org or self.missing
        return True


def _known(value: object) -> str | None:
    return value if isinstance(value, str) and value not in ("", "-") else None


class PlainFormatter(logging.Formatter):
    """``time level logger [request id] session_id=… turn_id=… org=… message``.

    The ids show when the record belongs to a turn or a tool call; a record no filter
    annotated shows ``-`` for the request id.
    """

    def __init__(self) -> None:
        super().__init__(PLAIN_FORMAT, defaults={"request_id": "-", "ids": ""})

    def format(self, record: logging.LogRecord) -> str:
        """One line per record; a traceback's lines follow, indented."""
        clean = logging.makeLogRecord(record.__dict__)
        clean.msg, clean.args, clean.exc_text = record.getMessage(), None, None
        ids = [
            f" {name}={value}"
            for name in ("session_id", "turn_id", "org")
            if (value := _known(getattr(record, name, None)))
        ]
        clean.ids = "".join(ids)
        for name, value in vars(clean).items():
            if isinstance(value, str) and name != "stack_info":
                setattr(clean, name, _line(value))
        first, *rest = super().format(clean).split("\n")
        # A lone surrogate (an endpoint's \ud800) is U+FFFD: a UTF-8 log file drops the line.
        return without_surrogates("\n".join([first, *("  " + _line(line) for line in rest)]))


def _line(text: str) -> str:
    return bounded(escape_controls(mask_credentials(text)), FIELD_LIMIT)


class JsonLinesFormatter(JsonFormatter):
    """One JSON object per line: time, level, logger, message, the ids, structured fields."""

    def __init__(self) -> None:
        super().__init__(
            "%(levelname)s %(name)s %(message)s",
            rename_fields={"levelname": "level", "name": "logger", "exc_info": "exception"},
            timestamp="time",
            json_ensure_ascii=False,
        )

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        """The standard fields, then the ids and Aptix's tag and key/value pairs, flattened."""
        super().add_fields(log_data, record, message_dict)
        log_data.pop("color_message", None)  # uvicorn's coloured copy of the message
        log_data["level"] = record.levelname.lower()
        for name in ("request_id", "session_id", "turn_id", "conversation_id", "org"):
            log_data[name] = getattr(record, name, None)
        tag = log_data.pop("aptix_tag", None)
        if tag:
            log_data["tag"] = tag
        log_data.update(log_data.pop("aptix_fields", None) or {})
        if record.name == "uvicorn.access" and isinstance(record.args, tuple):
            log_data.update(zip(_ACCESS_FIELDS, record.args, strict=False))
        for name, value in log_data.items():
            if isinstance(value, str):
                lines = value.split("\n") if name == "exception" else [value]
                log_data[name] = "\n".join(
                    bounded(mask_credentials(line), FIELD_LIMIT) for line in lines
                )

    def jsonify_log_record(self, log_data: dict[str, Any]) -> str:
        """The JSON line; what JSON leaves raw (C1, U+2028, U+2029, bidi, invisible) is escaped.

        A lone surrogate, which JSON written with ``ensure_ascii=False`` leaves raw, is U+FFFD.
        """
        line = _escaped(super().jsonify_log_record(log_data), invisible.escaped)
        return without_surrogates(line)  # as in plain text: the line stays UTF-8


def logging_config(level: str = "INFO", *, json_lines: bool = False) -> dict[str, Any]:
    """A :func:`logging.config.dictConfig` for the ``aptix`` and the ``uvicorn`` loggers.

    ``aptix`` logs at ``level``; uvicorn's loggers log at INFO (or DEBUG, when ``level`` is),
    so that ``aptix serve`` shows its start-up and an access line per request. In Aptix's own
    process (:func:`claim_process`) the root logger and Python warnings are configured too.
    """
    aptix_level = level.upper()
    server_level = "DEBUG" if aptix_level == "DEBUG" else "INFO"
    formatter: dict[str, Any] = {"()": JsonLinesFormatter} if json_lines else {"()": PlainFormatter}
    handler = {"handlers": ["stderr"], "propagate": False}
    stderr: dict[str, Any] = {"formatter": "aptix", "filters": ["ids"]}
    if _Process.claimed:  # made in uvicorn's --reload child too, which only applies this
        stderr["()"] = process_handler
    else:
        stderr.update({"class": "logging.StreamHandler", "stream": "ext://sys.stderr"})
    config: dict[str, Any] = {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"ids": {"()": LogContextFilter, "missing": None if json_lines else "-"}},
        "formatters": {"aptix": formatter},
        "handlers": {"stderr": stderr},
        "loggers": {
            "aptix": {**handler, "level": aptix_level},
            # `aptix serve`'s own start-up notices, shown like uvicorn's.
            "aptix.serve": {"level": server_level},
            "asgi_correlation_id": {**handler, "level": "WARNING"},
            # The OTLP exporter's complaints (an unreachable collector), in the same format.
            "opentelemetry": {**handler, "level": "WARNING"},
            "uvicorn": {**handler, "level": server_level},
            "uvicorn.error": {"level": server_level},
            "uvicorn.access": {**handler, "level": server_level},
        },
    }
    if _Process.claimed:
        config["root"] = {"handlers": ["stderr"], "level": ROOT_LEVEL}
    return config


def configure_logging(level: str = "INFO", *, json_lines: bool = False) -> None:
    """Configure the loggers of :func:`logging_config` in place.

    Unlike :func:`logging.config.dictConfig`, this leaves every other logger's handlers
    alone (a test's capture handler, an embedding application's own set-up). uvicorn's
    loggers are left to whoever runs uvicorn (``aptix serve`` passes :func:`logging_config`
    as its ``log_config``): adding a handler to ``uvicorn.access`` would switch on the access
    log of an application that runs uvicorn with ``access_log=False``.
    """
    config = logging_config(level, json_lines=json_lines)
    handler = _file_handler() or (
        process_handler() if _Process.claimed else logging.StreamHandler()
    )
    handler.setFormatter(JsonLinesFormatter() if json_lines else PlainFormatter())
    handler.addFilter(LogContextFilter(config["filters"]["ids"]["missing"]))
    for name, wanted in config["loggers"].items():
        if name.split(".")[0] == "uvicorn":
            continue
        logger = logging.getLogger(name)
        logger.setLevel(wanted["level"])
        if "handlers" in wanted:
            _close_files(logger.handlers)
            logger.handlers[:] = [handler]
            logger.propagate = False
    if _Process.claimed:
        _Process.json_lines = json_lines
        root = logging.getLogger()
        # Only an earlier Aptix handler is replaced: one a test or a debugger added stays.
        kept = [h for h in root.handlers if not isinstance(h, _ProcessHandler | _FileHandler)]
        _close_files(root.handlers)
        root.handlers[:] = [*kept, handler]
        root.setLevel(ROOT_LEVEL)


class _ProcessHandler(logging.StreamHandler[TextIO]):
    """The stderr handler of Aptix's own process (recognised when logging is set up again)."""


class _FileHandler(logging.FileHandler):
    """The handler of :func:`log_to_file` (recognised when logging is set up again)."""


def log_to_file(path: Path | None) -> None:
    """Send every logger :func:`configure_logging` sets up to ``path`` from its next call.

    ``aptix chat`` logs to a file, not over the conversation: its own lines and other
    libraries' (a trace exporter's warnings), from start-up on. A path that cannot be
    opened leaves the lines on stderr; None sends them to stderr again.
    """
    _Process.log_file = path


def _close_files(handlers: list[logging.Handler]) -> None:
    for handler in handlers:
        if isinstance(handler, _FileHandler):
            handler.close()


def _file_handler() -> logging.Handler | None:
    if _Process.log_file is None:
        return None
    if _Process.claimed:
        logging.captureWarnings(True)
    try:
        _Process.log_file.parent.mkdir(parents=True, exist_ok=True)
        return _FileHandler(_Process.log_file, encoding="utf-8")
    except OSError:  # an unwritable data directory
        return None


def process_handler() -> logging.Handler:
    """A stderr handler for Aptix's own process; Python warnings are logged from now on.

    A factory for :func:`logging.config.dictConfig` (``"()"``), so that uvicorn's ``--reload``
    child, which only applies :func:`logging_config`, logs its warnings too.
    """
    logging.captureWarnings(True)
    return _ProcessHandler(sys.stderr)


def claim_process() -> None:
    """Let :func:`configure_logging` set up the whole process: the ``aptix`` command's own.

    The root logger then writes other libraries' records in Aptix's format, Python warnings
    are logged (:func:`logging.captureWarnings`), and :func:`stderr_line` writes JSON when
    the logs are JSON. An application embedding Aptix keeps its own set-up: it never claims.
    """
    _Process.claimed = True


def stderr_line(level: int, message: str) -> bool:
    """Write ``message`` to stderr as one JSON log line when this process logs JSON lines.

    False (and nothing written) otherwise: the caller prints its own line. The record goes
    straight to stderr, past levels and handlers: it is a command's last word (``aptix chat``
    sends the ``aptix`` logger to a file).
    """
    if not (_Process.claimed and _Process.json_lines):
        return False
    record = logging.makeLogRecord(
        {"name": "aptix.cli", "levelno": level, "levelname": logging.getLevelName(level)}
    )
    record.msg = message
    LogContextFilter().filter(record)
    sys.stderr.write(JsonLinesFormatter().format(record) + "\n")
    sys.stderr.flush()
    return True
