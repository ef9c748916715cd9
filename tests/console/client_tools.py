"""A client-final tool for the console tests (loaded with ``APTIX_TOOL_MODULES``)."""

from __future__ import annotations

import aptix


@aptix.tool(usage="Prepare something only the client can do.", server_final=False)
async def client_thing(what: str) -> dict[str, str]:
    """Hand the work to the client.

    Args:
        what: what the client should do.
    """
    return {"prepared": what}
