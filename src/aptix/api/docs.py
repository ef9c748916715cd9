"""``/docs`` and ``/redoc`` with their assets served from the package, never from a CDN.

FastAPI's own pages load Swagger UI and ReDoc from a CDN; the assets shipped in
``fastapi-offline`` (Swagger UI 5, which reads OpenAPI 3.1) are served here instead, so the
docs work on a machine without internet access.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["ASSETS_URL", "install_offline_docs"]

ASSETS_URL = "/docs-assets"
_ASSETS = Path(fastapi_offline.__file__).parent / "static"


def install_offline_docs(app: FastAPI) -> None:
    """Add ``/docs`` and ``/redoc`` (create the app with ``docs_url=None, redoc_url=None``)."""
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
            redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )
