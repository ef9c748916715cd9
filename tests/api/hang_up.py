"""A streamed request sent straight to the app as uvicorn hands it over, for a client that leaves.

httpx's ASGI transport cannot hang up mid-answer; these tests need the app to hear
``http.disconnect`` once some of the answer has come.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import Message


def http_scope(path: str, headers: dict[str, str], method: str = "POST") -> dict[str, Any]:
    """The scope uvicorn gives the app for ``method path``: ``host``, then ``headers``."""
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1")]
        + [(name.lower().encode(), value.encode()) for name, value in headers.items()],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
        "state": {},
        "extensions": {},
    }


async def stream_then_hang_up(
    app: Any,
    scope: dict[str, Any],
    body: dict[str, Any],
    until: bytes,
    before_leaving: Callable[[], Awaitable[None]] | None = None,
) -> bytes:
    """POST ``body``; once ``until`` has come back, run ``before_leaving``, then hang up.

    Returns what came back. The app has 30 s to finish.
    """
    received = b""
    seen = asyncio.Event()
    requested = False

    async def receive() -> Message:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": json.dumps(body).encode()}
        await seen.wait()
        if before_leaving is not None:
            await before_leaving()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal received
        received += message.get("body", b"")
        if until in received:
            seen.set()

    await asyncio.wait_for(app(scope, receive, send), timeout=30)
    return received
