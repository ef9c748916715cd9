"""An MCP server (the SDK's ``MCPServer``) over streamable HTTP whose ``crash`` dies mid-call.

``python crash_server.py PORT MARKER [resumable]``: ``crash`` writes ``MARKER`` (the call took
effect), then the process exits while the call's event stream is open; ``echo`` answers. With
``resumable`` its events carry ids (as the reference server-everything's do), so the client
tries to resume the cut stream with a GET that the dead server refuses.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http import EventCallback, EventStore, StreamId
from mcp_types import JSONRPCMessage

server = MCPServer("crashing")


class Numbered(EventStore):
    """Gives each event an id and keeps none: enough for the client to try to resume."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> str:
        """A fresh id for the event."""
        return str(next(self._ids))

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> StreamId | None:
        """Nothing to replay (the process that would have is gone by then)."""
        return None


@server.tool()
async def crash(text: str) -> str:
    """Records ``text`` in the marker file, then kills the server process."""
    await asyncio.to_thread(Path(sys.argv[2]).write_text, text, encoding="utf-8")
    await asyncio.sleep(0.3)  # the answer's event stream is open by now
    os._exit(3)


@server.tool()
def echo(text: str) -> str:
    """Echoes the text back."""
    return text


if __name__ == "__main__":
    resumable = sys.argv[3:] == ["resumable"]
    server.run(
        "streamable-http",
        host="127.0.0.1",
        port=int(sys.argv[1]),
        # A short wait before the client's resuming GET keeps the test quick.
        event_store=Numbered() if resumable else None,
        retry_interval=100 if resumable else None,
    )
