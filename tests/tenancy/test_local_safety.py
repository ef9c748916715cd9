"""Local safety (issue 14 #6): a keyless app answers loopback only; keys guard operations."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import httpx
import pytest

from aptix.api import create_app
from aptix.errors import ConfigurationError
from aptix.settings import AptixSettings
from tests.api.live import free_port, serve
from tests.tenancy.conftest import KEYS, bearer

MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
PING = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


def _settings(tmp_path: Path, **values: object) -> AptixSettings:
    return AptixSettings(data_dir=tmp_path, load_plugins=False, semantic_matching=False, **values)


@asynccontextmanager
async def served_app(settings: AptixSettings, base_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its lifespan (so /mcp is mounted), in the test's own task."""
    app = create_app(settings)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url=base_url) as client,
    ):
        yield client


def keyless(tmp_path: Path) -> AbstractAsyncContextManager[httpx.AsyncClient]:
    return served_app(_settings(tmp_path), "http://127.0.0.1:8000")


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8000", "127.0.0.1.nip.io"])
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/sessions"),
        ("GET", "/healthz"),
        ("GET", "/docs"),
        ("GET", "/openapi.json"),
        ("GET", "/metrics"),
        ("POST", "/mcp"),
        ("GET", "/console"),
    ],
)
async def test_a_keyless_app_answers_421_to_a_host_that_is_not_loopback(
    tmp_path: Path, host: str, method: str, path: str
) -> None:
    body = PING if method == "POST" else None
    async with keyless(tmp_path) as client:
        answer = await client.request(
            method, path, json=body, headers={"Host": host, **MCP_HEADERS}
        )
    assert answer.status_code == 421
    error = answer.json()["error"]
    assert error["code"] == "misdirected_request"
    assert f"not Host '{host}'" in error["message"]


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:8000", "127.0.0.1:8000", "[::1]:8000", "LOCALHOST"]
)
async def test_a_keyless_app_answers_loopback_names(tmp_path: Path, host: str) -> None:
    async with keyless(tmp_path) as client:
        for path in ("/healthz", "/docs", "/openapi.json", "/metrics", "/v1/sessions"):
            answer = await client.get(path, headers={"Host": host})
            assert answer.status_code == 200, (path, answer.text)
        listed = await client.post("/mcp", json=PING, headers={"Host": host, **MCP_HEADERS})
    assert listed.status_code == 200, listed.text


@pytest.mark.parametrize("host", ["[::1", "localhost:http", "::1"])
async def test_a_malformed_host_is_refused(tmp_path: Path, host: str) -> None:
    async with keyless(tmp_path) as client:
        answer = await client.get("/healthz", headers={"Host": host})
    assert answer.status_code == 421


async def test_a_keyless_app_refuses_connections_from_or_to_other_addresses(
    tmp_path: Path,
) -> None:
    app = create_app(_settings(tmp_path))
    from_lan = httpx.ASGITransport(app=app, client=("192.168.1.7", 50000))
    async with httpx.AsyncClient(transport=from_lan, base_url="http://127.0.0.1") as client:
        answer = await client.get("/healthz")
    assert answer.status_code == 421
    assert "called from 192.168.1.7" in answer.json()["error"]["message"]
    # Bound to 0.0.0.0 and reached on the LAN address, with a forged loopback Host.
    on_lan = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=on_lan, base_url="http://10.1.2.3:8000") as client:
        answer = await client.get("/healthz", headers={"Host": "localhost"})
    assert answer.status_code == 421
    assert "reached on 10.1.2.3" in answer.json()["error"]["message"]


def test_create_app_itself_refuses_a_non_loopback_host_without_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="without APTIX_API_KEYS"):
        create_app(_settings(tmp_path, host="0.0.0.0"))
    create_app(_settings(tmp_path, host="0.0.0.0", api_keys=KEYS))
    create_app(_settings(tmp_path, host="::1"))


def test_uvicorn_factory_on_a_public_host_does_not_start_without_keys(tmp_path: Path) -> None:
    env = {**os.environ, "APTIX_DATA_DIR": str(tmp_path), "APTIX_HOST": "0.0.0.0"}
    env.pop("APTIX_API_KEYS", None)
    command = [sys.executable, "-m", "uvicorn", "--factory", "aptix.api.app:create_app"]
    run = subprocess.run(
        [*command, "--host", "127.0.0.1", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode != 0
    assert "without APTIX_API_KEYS" in run.stderr


def test_a_served_keyless_process_answers_421_to_attacker_example(tmp_path: Path) -> None:
    with serve(tmp_path, APTIX_SEMANTIC_MATCHING="false") as base:
        attacked = httpx.get(f"{base}/v1/sessions", headers={"Host": "attacker.example"})
        local = httpx.get(f"{base}/v1/sessions")
    assert attacked.status_code == 421
    assert attacked.json()["error"]["code"] == "misdirected_request"
    assert local.status_code == 200


@pytest.mark.parametrize("path", ["/metrics", "/docs", "/openapi.json", "/redoc"])
async def test_with_keys_operations_paths_need_a_key(tmp_path: Path, path: str) -> None:
    settings = _settings(tmp_path, api_keys=KEYS)
    async with served_app(settings, "http://aptix.example") as client:
        for headers in ({}, bearer("wrong"), {"Authorization": "Basic k-ann"}):
            refused = await client.get(path, headers=headers)
            assert refused.status_code == 401
            assert refused.headers["www-authenticate"] == 'Bearer realm="aptix"'
            assert refused.json()["error"]["code"] == "unauthorized"
        assert (await client.get(path, headers=bearer("k-ann"))).status_code == 200
        # A keyed server answers any Host: the key is the guard.
        assert (await client.get("/healthz")).status_code == 200


@pytest.mark.parametrize("path", ["/metrics", "/docs", "/openapi.json"])
async def test_public_metrics_serves_operations_paths_without_a_key(
    tmp_path: Path, path: str
) -> None:
    settings = _settings(tmp_path, api_keys=KEYS, public_metrics=True)
    async with served_app(settings, "http://aptix.example") as client:
        assert (await client.get(path)).status_code == 200
        assert (await client.get("/v1/sessions")).status_code == 401


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1.evil.example"])
async def test_a_keyless_app_refuses_pages_of_other_sites(tmp_path: Path, origin: str) -> None:
    async with keyless(tmp_path) as client:
        for path in ("/v1/sessions", "/mcp"):
            answer = await client.post(path, json=PING, headers={"Origin": origin, **MCP_HEADERS})
            assert answer.status_code == 403, answer.text
            assert answer.json()["error"]["code"] == "forbidden"
        same_site = await client.post(
            "/v1/sessions", json={}, headers={"Origin": "http://localhost:8000"}
        )
    assert same_site.status_code == 201


async def test_with_keys_mcp_answers_a_real_host_name(tmp_path: Path) -> None:
    settings = _settings(tmp_path, api_keys=KEYS)
    async with served_app(settings, "https://aptix.example.com") as client:
        listed = await client.post("/mcp", json=PING, headers={**MCP_HEADERS, **bearer("k-ann")})
    assert listed.status_code == 200, listed.text
    assert listed.json()["result"]["tools"]


async def test_a_websocket_to_a_foreign_host_is_closed_before_the_app_sees_it() -> None:
    from aptix.api.edge import LoopbackOnly

    reached: list[object] = []
    sent: list[dict[str, object]] = []

    async def app(scope: object, receive: object, send: object) -> None:
        reached.append(scope)

    async def receive() -> dict[str, object]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    guard = LoopbackOnly(app)  # type: ignore[arg-type]
    scope = {"type": "websocket", "path": "/ws", "headers": [(b"host", b"attacker.example")]}
    await guard(scope, receive, send)  # type: ignore[arg-type]
    assert reached == []
    assert sent[0]["type"] == "websocket.close"
    assert sent[0]["code"] == 1008
    lifespan = {"type": "lifespan"}
    await guard(lifespan, receive, send)  # type: ignore[arg-type]
    assert reached == [lifespan]
