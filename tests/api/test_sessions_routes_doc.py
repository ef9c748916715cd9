"""docs/http-api.md says what the sessions routes take and answer (review r5 F1, F2, round 72).

``GET /v1/sessions`` pages with ``limit`` and ``offset``, which the page did not name, so the
sessions past the first 50 could not be reached from it; cancelling a workflow when none is
active answers 409, which it did not say.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from aptix.api import create_app
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings

DOC = " ".join(
    (Path(__file__).resolve().parents[2] / "docs" / "http-api.md").read_text("utf-8").split()
)


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = AptixSettings(
        data_dir=tmp_path, load_plugins=False, semantic_matching=False, llm_model="demo"
    )
    async with open_runtime(settings) as runtime:
        transport = httpx.ASGITransport(app=create_app(runtime=runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            yield c


async def test_the_session_lists_paging_is_documented_as_served(
    client: httpx.AsyncClient,
) -> None:
    assert "`GET /v1/sessions?limit=&offset=`" in DOC
    spec = (await client.get("/openapi.json")).json()
    params = {p["name"]: p["schema"] for p in spec["paths"]["/v1/sessions"]["get"]["parameters"]}
    limit, offset = params["limit"], params["offset"]
    assert (
        f"`limit` at a time (default {limit['default']}, {limit['minimum']} to "
        f"{limit['maximum']}) after skipping `offset` (default {offset['default']}, at most "
        f"{offset['maximum']:,})"
    ) in DOC
    created = [(await client.post("/v1/sessions", json={})).json()["sessionId"] for _ in range(3)]
    first = (await client.get("/v1/sessions?limit=2")).json()
    rest = (await client.get("/v1/sessions?limit=2&offset=2")).json()
    listed = [s["sessionId"] for s in first + rest]
    assert (len(first), sorted(listed)) == (2, sorted(created))  # each once, over two pages
    too_many = await client.get(f"/v1/sessions?limit={limit['maximum'] + 1}")
    assert too_many.status_code == 422


async def test_cancelling_with_no_active_workflow_is_the_documented_409(
    client: httpx.AsyncClient,
) -> None:
    session_id = (await client.post("/v1/sessions", json={})).json()["sessionId"]
    answered = await client.post(f"/v1/sessions/{session_id}/workflow/cancel")
    assert answered.status_code == 409
    error = answered.json()["error"]
    documented = re.search(r"/workflow/cancel` \| [^|]*409 `(\w+)` \"([^\"]+)\"", DOC)
    assert documented, "docs/http-api.md does not name the cancel's 409"
    assert (error["code"], error["message"]) == documented.groups()
