"""A keyed runtime with two orgs and each role, and an HTTP client per key."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from aptix.api import create_app
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel

KEYS = (
    "k-ann=acme:ann,k-amy=acme:amy,k-author=acme:ada:author,k-admin=acme:root:admin,"
    "k-bob=globex:bob,k-bauthor=globex:bea:author,k-badmin=globex:boss:admin"
)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
async def keyed(tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = AptixSettings(
        data_dir=tmp_path, load_plugins=False, api_keys=KEYS, semantic_matching=False
    )
    async with open_runtime(settings) as runtime:
        yield runtime


@pytest.fixture
async def http(
    keyed: Runtime, model: ScriptedModel
) -> AsyncIterator[Callable[[str], httpx.AsyncClient]]:
    """``http("k-ann")``: a client on the keyed app authenticated with that key."""
    app = create_app(runtime=keyed, model=model)
    clients: list[httpx.AsyncClient] = []

    def make(key: str) -> httpx.AsyncClient:
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://test", headers=bearer(key)
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()
