"""``HEAD`` on every ``GET`` route: ``GET``'s status and headers, no body; ``Allow`` says so."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from fastapi import FastAPI

from aptix.api import create_app
from aptix.runtime import Runtime
from aptix.testing import ScriptedModel
from tests.api.conftest import A
from tests.api.live import Served, served

#: Headers that differ between any two requests (the request id is made per request).
PER_REQUEST = {"x-request-id"}


@pytest.fixture
def app(keyed_runtime: Runtime) -> FastAPI:
    return create_app(runtime=keyed_runtime, model=ScriptedModel())


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test", headers=A) as c:
        yield c


def _get_paths(app: FastAPI, session: str, workflow: str) -> list[str]:
    """Every GET path of the document, its parameters filled with things that exist."""
    fill = {"{session_id}": session, "{workflow_id}": workflow, "{model}": "aptix-general"}
    paths = []
    for template, operations in app.openapi()["paths"].items():
        if "get" in operations:
            path = template
            for name, value in fill.items():
                path = path.replace(name, value)
            assert "{" not in path, f"no value for {template}"
            paths.append(path)
    return paths


async def test_head_answers_every_get_route_as_get_does_without_a_body(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    session = (await client.post("/v1/sessions", json={})).json()["sessionId"]
    workflow = (await client.get("/v1/workflows")).json()["workflows"][0]["workflowId"]
    paths = _get_paths(app, session, workflow)
    # The routes the review found refused, and those served outside FastAPI's routes.
    for path in ("/healthz", "/metrics", "/v1/modes", "/v1/sessions", "/v1/models"):
        assert path in paths
    paths += ["/console/", "/docs", "/redoc", "/docs-assets/swagger-ui.css", "/openapi.json"]
    for path in paths:
        got = await client.get(path)
        head = await client.head(path)
        assert head.status_code == got.status_code, (path, head.status_code, got.text)
        assert head.content == b"", path
        if path == "/metrics":  # counts this very request: its length changes every time
            assert head.headers["content-type"] == got.headers["content-type"]
            continue
        same = {k: v for k, v in got.headers.items() if k not in PER_REQUEST}
        assert {k: v for k, v in head.headers.items() if k not in PER_REQUEST} == same, path


async def test_head_is_refused_where_get_is_and_allow_tells_the_truth(
    client: httpx.AsyncClient,
) -> None:
    # A POST-only path: HEAD is not allowed there, and Allow does not say it is.
    refused = await client.head("/v1/chat/completions")
    assert (refused.status_code, refused.headers["allow"], refused.content) == (405, "POST", b"")
    # A GET route outside the document lists HEAD too, now that HEAD is answered there.
    docs = await client.post("/docs")
    assert (docs.status_code, docs.headers["allow"]) == (405, "GET, HEAD")
    # The same answer to HEAD without a key as to GET: 401, with its challenge.
    anonymous = await client.head("/v1/sessions", headers={"Authorization": ""})
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith("Bearer")


async def test_the_document_has_no_head_operations(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    methods = {method for operations in document["paths"].values() for method in operations}
    assert "head" not in methods
    assert "get" in methods


async def test_head_requests_are_counted_as_head_under_their_route(
    client: httpx.AsyncClient,
) -> None:
    assert (await client.head("/healthz")).status_code == 200
    metrics = (await client.get("/metrics")).text
    assert 'aptix_http_requests_total{method="HEAD",route="/healthz",status="200"} 1.0' in metrics


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served(
        tmp_path_factory.mktemp("head"),
        APTIX_SEMANTIC_MATCHING="false",
        APTIX_LOAD_PLUGINS="false",
        APTIX_API_KEYS="key-a=acme:ann",
    ) as running:
        yield running


def test_a_served_process_answers_head_and_keeps_the_connection(server: Served) -> None:
    """Through uvicorn: what a load balancer's ``HEAD /healthz`` probe sees."""
    with httpx.Client(base_url=server.url, headers=A) as client:
        for path in ("/healthz", "/v1/modes", "/v1/sessions", "/metrics", "/console/"):
            head = client.head(path)
            assert head.status_code == 200, (path, head.text)
            assert head.content == b""
            assert int(head.headers["content-length"]) > 0, path  # a GET's length (§8.6)
        # The same connection serves on: the bodiless answers were framed as such.
        assert client.get("/healthz").json()["status"] == "ok"
