"""The address ``aptix serve`` announces, opened as it is, leads to the console (review r2 note).

``GET /`` answered 404 ``not_found``: a newcomer opening the banner's address in a browser met
an error page, and the banner did not name the console.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from aptix.api import create_app
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings


async def test_the_root_redirects_to_the_console_which_answers(tmp_path: Path) -> None:
    settings = AptixSettings(data_dir=tmp_path, semantic_matching=False)
    async with open_runtime(settings) as runtime:
        transport = httpx.ASGITransport(app=create_app(runtime=runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            root = await client.get("/")
            followed = await client.get("/", follow_redirects=True)
            schema = (await client.get("/openapi.json")).json()
    assert root.status_code == 307
    assert root.headers["location"] == "console/"  # relative: holds under a path prefix
    assert followed.status_code == 200
    assert str(followed.url) == "http://127.0.0.1/console/"
    assert "<html" in followed.text.lower()
    assert "/" not in schema["paths"]
