"""``/redoc`` names no outside address: its footer logo came from cdn.redoc.ly (review r2, F5)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from aptix.api import create_app
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings


async def test_the_redoc_bundle_served_loads_nothing_from_outside(tmp_path: Path) -> None:
    settings = AptixSettings(data_dir=tmp_path, semantic_matching=False)
    async with open_runtime(settings) as runtime:
        transport = httpx.ASGITransport(app=create_app(runtime=runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            page = await client.get("/redoc")
            [bundle_url] = re.findall(r'<script src="([^"]+)"', page.text)
            bundle = await client.get(bundle_url)
            logo = await client.get("/docs-assets/favicon.png")
    assert bundle.status_code == 200
    assert bundle.headers["content-type"].startswith("text/javascript")
    assert len(bundle.content) > 500_000  # the whole of ReDoc
    assert b"cdn.redoc.ly" not in bundle.content
    assert b'src:"/docs-assets/favicon.png"' in bundle.content
    assert logo.status_code == 200
