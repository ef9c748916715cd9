"""The server that each process started by ``aptix serve --reload``'s reloader runs."""

from __future__ import annotations

import socket

from aptix.cli.stopping_server import StoppingServer


class ReloadedServer(StoppingServer):
    """``aptix serve``'s server, keeping the listening socket it was handed from its own children.

    A :class:`StoppingServer`, so a turn that a reload or a stop cuts short past the drain is
    left for a retried resume, as without ``--reload``, not recorded as cancelled.
    """

    def run(self, sockets: list[socket.socket] | None = None) -> None:
        """Make ``sockets`` non-inheritable, then serve on them as uvicorn does."""
        # The reloader made them inheritable to hand them to this process. A stdio MCP server
        # started from here would get them too (uvloop passes on every inheritable
        # descriptor) and keep the port taken after this process is killed.
        for sock in sockets or ():
            sock.set_inheritable(False)
        super().run(sockets=sockets)
