"""docs/http-api.md says what the sessions routes take and answer (review r5 F1, F2, round 72).

``GET /v1/sessions`` pages with ``limit`` and ``offset``, which the page did not name, so the
sessions past the first 50 could not be reached from it; cancelling a workflow when none is
active answers 409, which it did not say.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx

DOC = " ".join(
    (Path(__file__).resolve().parents[2] / "docs" / "http-api.md").read_text("utf-8").split()
)


async def test_the_session_lists_paging_is_documented_as_served(
    demo_client: httpx.AsyncClient,
) -> None:
    assert "`GET /v1/sessions?limit=&offset=`" in DOC
    spec = (await demo_client.get("/openapi.json")).json()
    params = {p["name"]: p["schema"] for p in spec["paths"]["/v1/sessions"]["get"]["parameters"]}
    limit, offset = params["limit"], params["offset"]
    assert (
        f"`limit` at a time (default {limit['default']}, {limit['minimum']} to "
        f"{limit['maximum']}) after skipping `offset` (default {offset['default']}, at most "
        f"{offset['maximum']:,})"
    ) in DOC
    created = [
        (await demo_client.post("/v1/sessions", json={})).json()["sessionId"] for _ in range(3)
    ]
    first = (await demo_client.get("/v1/sessions?limit=2")).json()
    rest = (await demo_client.get("/v1/sessions?limit=2&offset=2")).json()
    listed = [s["sessionId"] for s in first + rest]
    assert (len(first), sorted(listed)) == (2, sorted(created))  # each once, over two pages
    too_many = await demo_client.get(f"/v1/sessions?limit={limit['maximum'] + 1}")
    assert too_many.status_code == 422


async def test_cancelling_with_no_active_workflow_is_the_documented_409(
    demo_client: httpx.AsyncClient,
) -> None:
    session_id = (await demo_client.post("/v1/sessions", json={})).json()["sessionId"]
    answered = await demo_client.post(f"/v1/sessions/{session_id}/workflow/cancel")
    assert answered.status_code == 409
    error = answered.json()["error"]
    documented = re.search(r"/workflow/cancel` \| [^|]*409 `(\w+)` \"([^\"]+)\"", DOC)
    assert documented, "docs/http-api.md does not name the cancel's 409"
    assert (error["code"], error["message"]) == documented.groups()
