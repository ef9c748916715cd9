"""Hostile HTTP input against a served process: oversized streams, and what they cost."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.api.live import Served, peak_rss_kib, served

CHUNK = b"x" * 65_536
TWO_MB_CHUNKS = 32


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served(
        tmp_path_factory.mktemp("hostile"),
        APTIX_SEMANTIC_MATCHING="false",
        APTIX_API_KEYS="key-a=acme:ann",
    ) as running:
        yield running


def _chunked() -> Iterator[bytes]:
    yield b'{"title": "'
    for _ in range(TWO_MB_CHUNKS):
        yield CHUNK
    yield b'"}'


@pytest.mark.parametrize("path", ["/v1/sessions", "/mcp"])
@pytest.mark.parametrize("key", ["key-a", "wrong"])
def test_a_chunked_2mb_body_is_refused_on_the_stream(server: Served, path: str, key: str) -> None:
    before = peak_rss_kib(server.pid)
    headers = {
        "Authorization": f"Bearer {key}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    for _ in range(5):
        response = httpx.post(f"{server.url}{path}", content=_chunked(), headers=headers)
        assert "content-length" not in response.request.headers
        # Refused unread (401, /mcp checks the key first) or cut off at the limit (413).
        expected = {413} if key == "key-a" else {401, 413}
        assert response.status_code in expected, response.text
        assert response.json()["error"]["code"] in {"payload_too_large", "unauthorized"}
    grown_kib = peak_rss_kib(server.pid) - before
    assert grown_kib < 10 * 1024, f"peak RSS grew by {grown_kib} KiB"


def test_405_keeps_the_allow_header(server: Served) -> None:
    response = httpx.delete(f"{server.url}/v1/sessions", headers={"Authorization": "Bearer key-a"})
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD, POST"
    assert response.json()["error"]["code"] == "method_not_allowed"
