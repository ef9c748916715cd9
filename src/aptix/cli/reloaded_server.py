"""The server that each process started by ``aptix serve --reload``'s reloader runs."""

from __future__ import annotations

import socket

import uvicorn


class ReloadedServer(uvicorn.Server):
    """uvicorn's server, keeping the listening socket it was handed from its own children."""

    def run(self, sockets: list[socket.socket] | None = None) -> None:
        """Make ``sockets`` non-inheritable, then serve on them as uvicorn does."""
        # The reloader made them inheritable to hand them to this process. A stdio MCP server
        # started from here would get them too (uvloop passes on every inheritable
        # descriptor) and keep the port taken after this process is killed.
        for sock in sockets or ():
            sock.set_inheritable(False)
        super().run(sockets=sockets)
