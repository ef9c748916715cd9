"""/metrics labels requests that a mount (the console, the docs' assets) or a plain route
(/mcp, /openapi.json) answered with that path; ``unmatched`` holds only what was answered
before any route was chosen."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from aptix.api import create_app
from aptix.settings import AptixSettings


def _counts(metrics: str) -> dict[tuple[str, str, str], float]:
    found = re.findall(
        r'^aptix_http_requests_total\{method="(\w+)",route="([^"]*)",status="(\d+)"\} (\S+)$',
        metrics,
        flags=re.MULTILINE,
    )
    return {(m, r, s): float(n) for m, r, s, n in found}


async def test_console_docs_assets_and_plain_routes_have_their_own_route_label(
    tmp_path: Path,
) -> None:
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, semantic_matching=False)
    app = create_app(settings)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client,
    ):
        for path, status in (
            ("/console/", 200),
            ("/console/", 200),
            ("/console/no-such-file.js", 404),
            ("/console", 307),  # the link in the docs: redirected to /console/
            ("/docs-assets/swagger-ui.css", 200),
            ("/openapi.json", 200),
            ("/no/such/path", 404),
        ):
            answer = await client.get(path)
            assert answer.status_code == status, path
        refused = await client.get("/console/", headers={"Host": "attacker.example"})
        assert refused.status_code == 421
        mcp = await client.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
        )
        assert mcp.status_code == 200, mcp.text
        counts = _counts((await client.get("/metrics")).text)
    assert counts[("GET", "/console", "200")] == 2
    assert counts[("GET", "/console", "404")] == 1
    assert counts[("GET", "/console", "307")] == 1
    assert counts[("GET", "/docs-assets", "200")] == 1
    assert counts[("GET", "/openapi.json", "200")] == 1
    assert counts[("POST", "/mcp", "200")] == 1
    # Only what no route answered: the unknown path and the refusal at the edge.
    unmatched = {k: v for k, v in counts.items() if k[1] == "unmatched"}
    assert unmatched == {("GET", "unmatched", "404"): 1, ("GET", "unmatched", "421"): 1}
