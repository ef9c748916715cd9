"""uvicorn's server, telling the turns it cancels past its drain that the process stops."""

from __future__ import annotations

import socket

import uvicorn

from aptix.reasoner.stopping import GRACEFUL_SECONDS, stop_process

__all__ = ["GRACEFUL_SECONDS", "StoppingServer"]


class StoppingServer(uvicorn.Server):
    """A turn cancelled by the shutdown was cut short, not cancelled by anyone.

    It is left as kill -9 would leave it, so a retried resume takes it over
    (:meth:`~aptix.reasoner.endings.TurnEndings.shut_down`), not refused as cancelled.
    """

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Mark the process stopping, then shut down as uvicorn does."""
        stop_process()
        await super().shutdown(sockets)
