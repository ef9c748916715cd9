"""The console's files and the offline /docs, in-process (no browser)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest

from aptix.api import create_app
from aptix.console import STATIC_DIR
from aptix.runtime import Runtime


@pytest.fixture
async def client(runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(runtime=runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        yield c


async def test_console_is_served_with_a_strict_content_security_policy(
    client: httpx.AsyncClient,
) -> None:
    moved = await client.get("/console")
    assert moved.status_code in (301, 302, 307, 308)
    assert moved.headers["location"].endswith("/console/")
    page = await client.get("/console/")
    assert page.status_code == 200
    assert "<title>Aptix console</title>" in page.text
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "connect-src 'self'" in policy
    script = await client.get("/console/js/app.js")
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]


def test_no_console_file_reaches_outside_or_writes_html() -> None:
    for path in STATIC_DIR.rglob("*"):
        if path.suffix not in {".html", ".js", ".css"} or path.parent.name == "vendor":
            continue
        text = path.read_text()
        assert not re.search(r"https?://", text), f"{path.name} names an outside URL"
        for writer in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"):
            assert writer not in text, f"{path.name} uses {writer}"


async def test_docs_and_redoc_load_their_assets_from_the_server(
    client: httpx.AsyncClient,
) -> None:
    for route in ("/docs", "/redoc"):
        page = await client.get(route)
        assert page.status_code == 200
        assert "cdn." not in page.text
        assert "fonts.googleapis" not in page.text
        for asset in re.findall(r'(?:src|href)="(/docs-assets/[^"]+)"', page.text):
            got = await client.get(asset)
            assert got.status_code == 200, asset
    bundle = await client.get("/docs-assets/swagger-ui-bundle.js")
    assert len(bundle.content) > 100_000


async def test_the_vendored_markdown_libraries_are_served_as_listed(
    client: httpx.AsyncClient,
) -> None:
    vendor = STATIC_DIR / "vendor"
    assert sorted(p.name for p in vendor.iterdir()) == [
        "LICENSE-dompurify",
        "LICENSE-markdown-it",
        "README.md",
        "markdown-it.js",
        "purify.js",
    ]
    readme = (vendor / "README.md").read_text()
    assert "markdown-it 15.0.3" in readme
    assert "dompurify 3.4.18" in readme
    for name in ("markdown-it.js", "purify.js"):
        served = await client.get(f"/console/vendor/{name}")
        assert served.status_code == 200
        assert "javascript" in served.headers["content-type"]
        assert "sourceMappingURL" not in served.text
