"""Request bodies read as JSON is written (RFC 8259), which has no ``NaN`` or ``Infinity``.

Python's reader takes ``NaN``, ``Infinity`` and ``-Infinity`` as numbers. What holds one
cannot be written back as JSON: PostgreSQL's ``json`` type refuses it and the model's client
cannot send it, so such a body was stored on SQLite, a 500 on PostgreSQL and a 502 blamed on
the model. Every route reads its body here (:class:`JsonBodyRoute`), and such a body is bad
JSON (:class:`NotJsonNumber`), refused before any route sees it, naming where the value is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from aptix.nul import dotted, find_place

__all__ = ["JsonBodyRequest", "JsonBodyRoute", "NotJsonNumber", "read_json"]

#: How much of the place is shown: a key can be as long as the body.
_PLACE_SHOWN = 200
#: The words Python's reader takes for numbers that JSON does not have.
_CONSTANTS = frozenset({"NaN", "Infinity", "-Infinity"})
#: How much of a number too large for a float is shown: its digits can be as long as the body.
_NUMBER_SHOWN = 40


def _shown_number(token: str) -> str:
    return token if len(token) <= _NUMBER_SHOWN else token[:_NUMBER_SHOWN] + "…"


class _Constant:
    """Stands for a ``NaN`` or ``Infinity`` in the value read, until its place is found."""

    __slots__ = ("token",)

    def __init__(self, token: str) -> None:
        self.token = token


class NotJsonNumber(ValueError):
    """A body holds ``NaN``, ``Infinity`` or ``-Infinity``, which JSON has no number for."""

    def __init__(self, token: str, path: list[str | int]) -> None:
        self.token = token
        self.path = path
        place = dotted(path)
        if len(place) > _PLACE_SHOWN:
            place = place[:_PLACE_SHOWN] + "…"
        what = f"{token} is not a JSON number"
        if token not in _CONSTANTS:
            what = f"{_shown_number(token)} is beyond the numbers Aptix reads (64-bit floats)"
        super().__init__(what + (f" (at '{place}')" if path else ""))

    @property
    def param(self) -> str | None:
        """The request field it is in, as OpenAI names one: ``response_format``, ``tools[0]``."""
        if not self.path or not isinstance(self.path[0], str):
            return None
        if len(self.path) > 1 and isinstance(self.path[1], int):
            return f"{self.path[0]}[{self.path[1]}]"
        return self.path[0]


def read_json(body: bytes | str) -> Any:
    """``body`` read as JSON; :class:`NotJsonNumber` for ``NaN``, ``Infinity`` or ``1e999``."""
    seen: list[_Constant] = []

    def constant(token: str) -> _Constant:
        seen.append(_Constant(token))
        return seen[-1]

    def number(token: str) -> float | _Constant:
        # 1e999 is JSON, but a float reads it as infinity, which cannot be written back.
        read = float(token)
        return constant(token) if math.isinf(read) else read

    value = json.loads(body, parse_constant=constant, parse_float=number)
    if not seen:
        return value
    path = find_place(value, lambda item: isinstance(item, _Constant))
    if path is None:
        # A key given twice keeps its last value: the constant is gone from what was read,
        # but it was in the body all the same.
        raise NotJsonNumber(seen[0].token, [])
    found = value
    for step in path:
        found = found[step]
    raise NotJsonNumber(found.token, path)


class JsonBodyRequest(Request):
    """A request whose JSON body is read by :func:`read_json`."""

    async def json(self) -> Any:
        """The body as JSON (read once); :class:`NotJsonNumber` for ``NaN`` or ``Infinity``."""
        if not hasattr(self, "_json"):
            self._json = read_json(await self.body())
        return self._json


class JsonBodyRoute(APIRoute):
    """A route whose body is read by :class:`JsonBodyRequest`: every Aptix router uses it.

    FastAPI answers an exception from reading the body with its generic 400; the error
    handlers read :class:`NotJsonNumber` behind it as bad JSON (:mod:`aptix.api.errors`).
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler, given the request as a :class:`JsonBodyRequest`."""
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            return await handler(JsonBodyRequest(request.scope, request.receive))

        return handle
