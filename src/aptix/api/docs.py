"""``/docs`` and ``/redoc`` with their assets served from the package, never from a CDN.

FastAPI's own pages load Swagger UI and ReDoc from a CDN; the assets shipped in
``fastapi-offline`` (Swagger UI 5, which reads OpenAPI 3.1) are served here instead, so the
docs work on a machine without internet access (ReDoc's footer logo included).
"""

from __future__ import annotations

import functools
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

__all__ = ["ASSETS_URL", "install_offline_docs"]

ASSETS_URL = "/docs-assets"
_ASSETS = Path(fastapi_offline.__file__).parent / "static"


#: ReDoc's footer shows Redocly's logo from their CDN: every visit would tell a third party
#: and fail offline. The bundle is served with the package's own icon in its place.
_REDOC_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
_REDOC_JS = "redoc.standalone.js"


@functools.cache
def _redoc_bundle() -> bytes:
    bundle = (_ASSETS / _REDOC_JS).read_bytes()
    return bundle.replace(_REDOC_LOGO, f"{ASSETS_URL}/favicon.png".encode())


def install_offline_docs(app: FastAPI) -> None:
    """Add ``/docs`` and ``/redoc`` (create the app with ``docs_url=None, redoc_url=None``)."""

    # Before the mount, which would otherwise answer this path with the bundle as shipped.
    @app.get(f"{ASSETS_URL}/{_REDOC_JS}", include_in_schema=False)
    async def redoc_bundle() -> Response:
        return Response(_redoc_bundle(), media_type="text/javascript; charset=utf-8")

    app.mount(ASSETS_URL, StaticFiles(directory=_ASSETS), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{ASSETS_URL}/{_REDOC_JS}",
            redoc_favicon_url=f"{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )
