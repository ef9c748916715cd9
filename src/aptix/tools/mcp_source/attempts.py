"""What the streamable-HTTP transport saw of one call's request: refused, or cut after sending.

The SDK turns both into error answers of its own (a POST that could not connect becomes
"Connection closed", the words it uses for a connection lost after sending; an event stream
cut mid-answer becomes "SSE stream ended without a response"), so the exception types are
noted here, as the HTTP client raises them, on the attempt of the call that sent the request.

Only the call's own request, refused before anything of the call came back, counts as never
delivered. A server whose events carry ids (the reference server-everything) gets a GET from
the SDK, in the call's context, to resume an answer stream that was cut; when the server died,
that GET is refused too, and the call's request had reached it all the same.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar
from dataclasses import dataclass

import httpx2

__all__ = ["Attempt", "NotingAttempts", "sending"]

#: Errors of a connection that was open: the request may have reached the server and run.
_CUT = (
    httpx2.ReadError,
    httpx2.WriteError,
    httpx2.RemoteProtocolError,
    httpx2.ReadTimeout,
    httpx2.WriteTimeout,
)


@dataclass(eq=False)
class Attempt:
    """What the HTTP transport saw of one call's request (it runs in the call's context)."""

    #: The connection for its request could not be opened, and nothing of the call had come
    #: back before: the request never left.
    refused: Exception | None = None
    #: The connection broke after it was open (the server died mid-answer), or a later request
    #: of the call (resuming its answer stream) was refused: the request may have taken effect.
    cut: Exception | None = None
    #: The server answered one of its requests (a status line came): it had the request.
    answered: bool = False


#: The attempt of the call whose request the transport is sending.
_ATTEMPT: ContextVar[Attempt | None] = ContextVar("aptix_mcp_attempt", default=None)


@contextlib.contextmanager
def sending(attempt: Attempt) -> Iterator[None]:
    """The requests sent from this task's context in the block are ``attempt``'s."""
    token = _ATTEMPT.set(attempt)
    try:
        yield
    finally:
        _ATTEMPT.reset(token)


class NotingAttempts(httpx2.AsyncBaseTransport):
    """An HTTP transport that tells the call whether its request was refused or cut."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send ``request``; what became of it is noted on the call's attempt."""
        attempt = _ATTEMPT.get()
        try:
            response = await self._inner.handle_async_request(request)
        except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
            if attempt is not None:
                if attempt.answered or attempt.cut is not None:
                    # The SDK resuming the call's cut answer stream: the server is gone, and
                    # it had the request.
                    attempt.cut = attempt.cut or exc
                else:
                    attempt.refused = exc
            raise
        except _CUT as exc:
            if attempt is not None:
                attempt.cut = attempt.cut or exc
            raise
        if attempt is not None:
            attempt.answered = True
            if isinstance(response.stream, httpx2.AsyncByteStream):
                response.stream = _NotingStream(response.stream, attempt)
        return response

    async def aclose(self) -> None:
        """Close the wrapped transport."""
        await self._inner.aclose()


class _NotingStream(httpx2.AsyncByteStream):
    """A response body whose reading, when the connection breaks, notes the attempt cut."""

    def __init__(self, inner: httpx2.AsyncByteStream, attempt: Attempt) -> None:
        self._inner = inner
        self._attempt = attempt

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except _CUT as exc:
            self._attempt.cut = self._attempt.cut or exc
            raise

    async def aclose(self) -> None:
        """Close the wrapped body."""
        await self._inner.aclose()
