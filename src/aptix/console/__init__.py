"""The web console at ``/console``: static files (HTML, ES modules, CSS) over the HTTP API.

No build step: the files in ``static/`` are what the browser runs. They talk only to the
``/v1`` routes with the same bearer keys, so the console sees exactly what the API shows the
key's org and user.
"""

from __future__ import annotations

from pathlib import Path

from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

__all__ = ["CONTENT_SECURITY_POLICY", "STATIC_DIR", "ConsoleFiles"]

STATIC_DIR = Path(__file__).parent / "static"

#: Only this origin's scripts, styles and requests: an injected tag could not load or send
#: anything, on top of the console rendering every outside string as text.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)


class ConsoleFiles(StaticFiles):
    """The console's files, ``index.html`` at ``/console/``, with a strict CSP."""

    def __init__(self) -> None:
        super().__init__(directory=STATIC_DIR, html=True)

    async def get_response(self, path: str, scope: Scope) -> Response:
        """The file, with the security headers every console response carries."""
        response = await super().get_response(path, scope)
        response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Cache-Control"] = "no-cache"  # revalidate: a new release shows at once
        return response
