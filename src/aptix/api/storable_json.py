"""``StorableJSONResponse``: a JSON answer that never fails on text it cannot encode."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from aptix.nul import storable_value

__all__ = ["StorableJSONResponse"]


class StorableJSONResponse(JSONResponse):
    """Like ``JSONResponse``; a lone surrogate in the content is shown as U+FFFD.

    Such text can come from data stored before the edge refused it: reading it back must
    not fail. The content is only walked when the plain encoding fails.
    """

    def render(self, content: Any) -> bytes:
        """Encode ``content``; on a lone surrogate, encode it with U+FFFD in its place."""
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return super().render(storable_value(content))
