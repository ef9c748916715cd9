r"""Whether a body or a line is one JSON-RPC 2.0 message Aptix can answer, alike on every transport.

The SDK reads a message whose ``id`` is neither a string nor an integer (an object, ``1.5``,
``true``, ``null``) as a notification and never answers it, so a client waiting for the
answer waits forever; such a message is refused here as an invalid request instead.

A request whose ``id`` is a string or an integer is answered with that id whatever else is
wrong with it (JSON-RPC 2.0 allows ``null`` only when the id cannot be read): ``params`` that
are not an object with invalid params (-32602), any other fault with an invalid request.

A lone surrogate escape (``"\ud800"``) is valid JSON that the SDK's parser cannot read. Text
with one is refused on every surface (:data:`aptix.nul.SURROGATE_REFUSED`), so such a request
is answered with its own id and invalid params (-32602) in the same words, never "not JSON".
So is a number written with more than :data:`NUMBER_DIGITS` digits before its point: valid
JSON, which neither the SDK's parser nor Python's ``int`` reads (-32602 in ``params``, else
-32600, naming its place).

A JSON array is a JSON-RPC batch: MCP protocol 2025-03-26 requires a server to accept one, and
2025-06-18 removed them. A transport takes a batch apart (:func:`batch`) for a session on
2025-03-26; anywhere else it is refused in words that say why (:func:`batch_refused`).
"""

from __future__ import annotations

import json
from typing import NamedTuple

import pydantic_core
from mcp import types
from pydantic import ValidationError

from aptix.nul import (
    SURROGATE_REFUSED,
    dotted,
    find_place,
    find_surrogate,
    storable,
    storable_value,
)

__all__ = [
    "BATCH_VERSION",
    "EMPTY_BATCH",
    "INITIALIZE_IN_BATCH",
    "INVALID",
    "NOT_JSON",
    "NOT_UTF8",
    "NUMBER_DIGITS",
    "PARAMS_NOT_OBJECT",
    "TOO_DEEP",
    "Problem",
    "batch",
    "batch_part",
    "batch_refused",
    "error",
    "plain_id",
    "problem",
    "refusal",
]

INVALID = "Invalid Request: not a JSON-RPC 2.0 message."
#: JSON-RPC 2.0 also allows positional params (an array); MCP names every parameter.
PARAMS_NOT_OBJECT = "Invalid params: params must be a JSON object (MCP names every parameter)."
#: Valid JSON the parser refuses to read (its recursion limit): saying "not JSON" would send
#: the client hunting for a syntax error that is not there.
TOO_DEEP = "Invalid Request: the JSON is nested too deeply (at most about 200 levels are read)."
NOT_UTF8 = "Parse error: the message is not valid UTF-8."
NOT_JSON = "Parse error: the body is not JSON."
#: The one protocol version with JSON-RPC batches: 2025-06-18 removed them.
BATCH_VERSION = "2025-03-26"
#: JSON-RPC 2.0 answers an empty array with one invalid request.
EMPTY_BATCH = "Invalid Request: the batch is empty."
#: MCP 2025-03-26 (lifecycle): nothing else can be sent before initialization completes.
INITIALIZE_IN_BATCH = "Invalid Request: initialize may not be part of a batch; send it alone."
#: The most digits before its point a number may have: the SDK's parser reads no more (nor
#: Python's ``int``, by default), where JSON sets no limit.
NUMBER_DIGITS = 4300
# How much of the place of a lone surrogate is shown: a key can be as long as the body.
_PLACE_SHOWN = 200


class Problem(NamedTuple):
    """Why a body is not one message Aptix can answer, and the id to answer it with."""

    code: int
    message: str
    #: The request's own id when it could be read, else None.
    request_id: str | int | None = None


def problem(body: bytes | str) -> Problem | None:
    """The JSON-RPC error for a body that is not one message Aptix can answer; None for one."""
    try:
        raw = pydantic_core.from_json(body)
    except ValueError as exc:
        if "recursion limit" in str(exc):
            return Problem(types.INVALID_REQUEST, TOO_DEEP)
        return _read_by_python(body)
    return _shape_problem(raw)


def refusal(body: bytes | str) -> dict[str, object] | None:
    """The answer to a body that is not one JSON-RPC 2.0 message; None for one that is."""
    if isinstance(body, bytes):
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            return error(types.PARSE_ERROR, NOT_UTF8)
    found = problem(body)
    return None if found is None else error(*found)


def error(code: int, message: str, request_id: str | int | None = None) -> dict[str, object]:
    """A JSON-RPC 2.0 error answer; ``request_id`` is None when the id could not be read."""
    # The id of a message that could not be read is unknown: JSON-RPC 2.0 says null.
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def batch(body: bytes | str) -> list[object] | None:
    """The messages of a body that is a JSON array of at least one; None for any other body."""
    if body.lstrip()[:1] not in (b"[", "["):
        return None
    try:
        text = body.decode("utf-8") if isinstance(body, bytes) else body
        # Python's parser, as for a lone surrogate: each message is then checked on its own.
        parts = _python_read(text)
    except (ValueError, RecursionError):
        return None  # refused whole, as any other body that cannot be read
    return parts if isinstance(parts, list) and parts else None


def batch_part(part: object) -> tuple[str, Problem | None]:
    """One message of a batch as text, and the problem refusing it (None: it can be answered)."""
    if isinstance(part, list):  # a batch inside a batch is no message
        return "", Problem(types.INVALID_REQUEST, INVALID)
    try:
        text = json.dumps(part)  # escapes a lone surrogate again, for :func:`problem` to name
    except TypeError:  # a number too long to read stands in it, and cannot be written back
        return "", _long_number(part) or Problem(types.INVALID_REQUEST, INVALID)
    if (found := problem(text)) is not None:
        return text, found
    if isinstance(part, dict) and part.get("method") == "initialize" and "id" in part:
        return text, Problem(types.INVALID_REQUEST, INITIALIZE_IN_BATCH, part["id"])
    return text, None


def batch_refused(version: str | None = None) -> str:
    """The words refusing a batch, naming the session's ``version`` when it is known."""
    words = (
        "Invalid Request: JSON-RPC batches are accepted only under MCP protocol version "
        f"{BATCH_VERSION} (2025-06-18 removed them)"
    )
    if version is not None:
        words += f", and this session is on {version}"
    return words + "; send one message at a time."


def _shape_problem(raw: object) -> Problem | None:
    if isinstance(raw, list):  # a batch, where the transport takes none apart
        return Problem(types.INVALID_REQUEST, batch_refused() if raw else EMPTY_BATCH)
    if isinstance(raw, dict) and "id" in raw and not plain_id(raw["id"]):
        return Problem(types.INVALID_REQUEST, INVALID)
    try:
        types.jsonrpc_message_adapter.validate_python(raw, by_name=False)
    except ValidationError:
        return _refused_request(raw)
    return None


def _refused_request(raw: object) -> Problem:
    """The refusal of a message that is no JSON-RPC message, with its id when it is a request."""
    # A response of the client's (a result or an error, no method) carries the id of a request
    # of the server's: never answered with it, the client would take it for its own request's.
    if not isinstance(raw, dict) or "id" not in raw:
        return Problem(types.INVALID_REQUEST, INVALID)
    if "method" not in raw and ("result" in raw or "error" in raw):
        return Problem(types.INVALID_REQUEST, INVALID)
    request_id = raw["id"]  # a string or an integer: checked before
    params = raw.get("params")
    shaped = raw.get("jsonrpc") == "2.0" and isinstance(raw.get("method"), str)
    if shaped and params is not None and not isinstance(params, dict):
        return Problem(types.INVALID_PARAMS, PARAMS_NOT_OBJECT, request_id)
    return Problem(types.INVALID_REQUEST, INVALID, request_id)


def _read_by_python(body: bytes | str) -> Problem:
    """The answer to a body the SDK's parser refused.

    A lone surrogate's or a too long number's, naming its place, or "not JSON".
    """
    try:
        text = body.decode("utf-8") if isinstance(body, bytes) else body
        # Python's parser reads a lone surrogate escape (into a str no encoder takes), and
        # here a number of any length (as a stand-in).
        raw = _python_read(text)
    except ValueError:
        return Problem(types.PARSE_ERROR, NOT_JSON)
    except RecursionError:
        return Problem(types.INVALID_REQUEST, TOO_DEEP)
    try:
        return _long_number(raw) or _lone_surrogate(raw)
    except RecursionError:
        # Read as deep as the parser goes: walking it again from here may go deeper still.
        return Problem(types.INVALID_REQUEST, TOO_DEEP)


def _lone_surrogate(raw: object) -> Problem:
    """The answer to a message read by Python's parser: a lone surrogate's, or "not JSON"."""
    place = find_surrogate(raw)
    if place is None:  # something else the SDK's parser refuses (NaN, say)
        return Problem(types.PARSE_ERROR, NOT_JSON)
    # Read with the surrogates replaced, it must still be a message: else it is refused as one.
    if (shape := _shape_problem(storable_value(raw))) is not None:
        if shape.request_id is None or not isinstance(raw, dict):
            return shape
        # The id as sent, not as made storable; one that cannot be sent back is not read.
        sent = raw.get("id")
        return shape._replace(request_id=None if find_surrogate(sent) is not None else sent)
    if not isinstance(raw, dict):  # no JSON-RPC message is anything but an object
        return Problem(types.INVALID_REQUEST, INVALID)
    request_id = raw.get("id") if "method" in raw else None
    if isinstance(request_id, str) and find_surrogate(request_id) is not None:
        request_id = None  # an id that cannot be sent back as UTF-8 is not read
    shown = storable(place)
    if len(shown) > _PLACE_SHOWN:
        shown = shown[:_PLACE_SHOWN] + "…"
    return Problem(types.INVALID_PARAMS, f"{SURROGATE_REFUSED} (found in '{shown}').", request_id)


def plain_id(value: object) -> bool:
    """Whether ``value`` is an id the SDK answers: a string or an integer (not a bool)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


class _LongNumber:
    """Stands for a number with more than :data:`NUMBER_DIGITS` digits before its point."""

    __slots__ = ()


_LONG = _LongNumber()


def _whole_digits(text: str) -> int:
    """How many digits a JSON number is written with before its point or exponent."""
    unsigned = text.lstrip("-")
    return len(unsigned) - len(unsigned.lstrip("0123456789"))


def _read_int(text: str) -> int | _LongNumber:
    if _whole_digits(text) > NUMBER_DIGITS:
        return _LONG
    try:
        return int(text)
    except ValueError:  # a lower limit set for the process (PYTHONINTMAXSTRDIGITS)
        return _LONG


def _read_float(text: str) -> float | _LongNumber:
    # Python reads it (as a float), the SDK's parser does not: refused alike.
    return _LONG if _whole_digits(text) > NUMBER_DIGITS else float(text)


def _python_read(text: str) -> object:
    """``text`` read by Python's parser, each number too long to read standing as ``_LONG``."""
    return json.loads(text, parse_int=_read_int, parse_float=_read_float)


def _long_number(raw: object) -> Problem | None:
    """The refusal of a message holding a number too long to read, with its id if it has one."""
    path = find_place(raw, lambda item: item is _LONG)
    if path is None:
        return None
    request_id = raw.get("id") if isinstance(raw, dict) and "method" in raw else None
    if not plain_id(request_id) or find_surrogate(request_id) is not None:
        request_id = None  # unreadable, or not to be sent back as UTF-8
    try:
        # Read with the number as 0, it must still be a message: else it is refused as one.
        shape = _shape_problem(storable_value(_as_zero(raw)))
    except RecursionError:  # walked again, deeper than the parser went
        return Problem(types.INVALID_REQUEST, TOO_DEEP)
    if shape is not None:
        return shape._replace(request_id=request_id if shape.request_id is not None else None)
    place = dotted(path)
    if len(place) > _PLACE_SHOWN:
        place = place[:_PLACE_SHOWN] + "…"
    words = f"the number at '{place}' is too long to read (more than {NUMBER_DIGITS:,} digits)."
    if path[:1] == ["params"]:
        return Problem(types.INVALID_PARAMS, f"Invalid params: {words}", request_id)
    return Problem(types.INVALID_REQUEST, f"Invalid Request: {words}", request_id)


def _as_zero(raw: object) -> object:
    """``raw`` with each number too long to read as 0."""
    if raw is _LONG:
        return 0
    if isinstance(raw, dict):
        return {k: _as_zero(v) for k, v in raw.items()}
    if isinstance(raw, list):
        return [_as_zero(v) for v in raw]
    return raw
