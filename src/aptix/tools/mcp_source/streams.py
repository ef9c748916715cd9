"""The transport's streams as the session gets them: what the server sends is read here first.

:class:`Watched` is the read stream. It tells of its end; a reply the SDK could not read
becomes the error answer to its call (:func:`~.replies.answer_in`) or is reported; an answer
to a ``tools/list`` request is read tool by tool (:class:`~.listing.Listings`). :class:`Noted`
is the write stream, which notes those requests as they go.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

import anyio
from mcp.shared.message import SessionMessage

from aptix.tools.mcp_source.listing import Listings, read_refused_page
from aptix.tools.mcp_source.replies import answer_in, refused_line

__all__ = ["Noted", "Watched"]


class _Wrapping:
    """A stream around the transport's own: closing it closes that one."""

    _inner: Any

    async def aclose(self) -> None:
        """Close the underlying stream."""
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class Watched(_Wrapping):
    """The transport's read stream: ``on_end`` hears of its end.

    A reply the transport could not read comes as an exception: one that answers a call
    becomes that call's error answer, any other goes to ``on_stray`` (and on to the session,
    which ignores it). An answer to a ``tools/list`` request leaves out the tools the SDK
    cannot read.
    """

    def __init__(
        self,
        inner: Any,
        on_end: Callable[[], None],
        on_stray: Callable[[Exception], None],
        listings: Listings,
    ) -> None:
        self._inner = inner
        self._on_end = on_end
        self._on_stray = on_stray
        self._listings = listings

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item, as the SDK's context streams carry it."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        """The next item from the server."""
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise
        if isinstance(item, SessionMessage):
            return self._listings.received(item)
        if not isinstance(item, Exception):
            return item
        # Reading a line nested past the SDK's parser again takes Python about a second
        # per few MB: a worker thread does it, not the loop every session and turn shares.
        answer = await anyio.to_thread.run_sync(answer_in, item)
        if answer is None:
            self._on_stray(item)
            return item
        line = refused_line(item)
        if line is not None and self._listings.answers(answer):
            answer = await anyio.to_thread.run_sync(read_refused_page, answer, line)
        return self._listings.received(answer)

    def __aiter__(self) -> Watched:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class Noted(_Wrapping):
    """The transport's write stream: ``listings`` notes each ``tools/list`` request sent."""

    def __init__(self, inner: Any, listings: Listings) -> None:
        self._inner = inner
        self._listings = listings

    async def send(self, item: SessionMessage) -> None:
        """Send ``item`` to the server."""
        self._listings.sent(item)
        await self._inner.send(item)
