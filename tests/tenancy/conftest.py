"""A keyed runtime with two orgs and each role, an HTTP client per key, and the CLI in a session."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import Result
from typer.testing import CliRunner

from aptix.api import create_app
from aptix.cli.main import app as cli
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel

KEYS = (
    "k-ann=acme:ann,k-amy=acme:amy,k-author=acme:ada:author,k-admin=acme:root:admin,"
    "k-bob=globex:bob,k-bauthor=globex:bea:author,k-badmin=globex:boss:admin"
)


#: Opens a session on a runtime for an org and a user, and returns its id.
SessionMaker = Callable[[Runtime, str, str], Awaitable[str]]
#: The ``hello_from_cli`` fixture.
HelloFromCli = Callable[[SessionMaker], Result]


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def session_in_workflow(runtime: Runtime, org: str = "acme", user: str = "ann") -> str:
    """A new session of ``org``'s ``user`` with the ``guided_calculation`` workflow active."""
    created = await runtime.services.sessions.create_session(org=org, user=user)
    assert created.result is not None
    started = await runtime.services.sessions.set_active_workflow(
        created.result.id, "guided_calculation", org, user
    )
    assert started.successful
    return created.result.id


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


@asynccontextmanager
async def key_clients(app: Any) -> AsyncIterator[Callable[[str], httpx.AsyncClient]]:
    """``make("k-ann")``: a client on ``app`` authenticated with that key; all closed at the end."""
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


@pytest.fixture
async def http(
    keyed: Runtime, model: ScriptedModel
) -> AsyncIterator[Callable[[str], httpx.AsyncClient]]:
    """``http("k-ann")``: a client on the keyed app authenticated with that key."""
    async with key_clients(create_app(runtime=keyed, model=model)) as make:
        yield make


@pytest.fixture
def hello_from_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HelloFromCli:
    """``hello_from_cli(make)``: ``tools call agent_hello_world`` in the session ``make`` opens.

    ``make`` runs on the CLI's own runtime, as org and user ``local``.
    """
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("APTIX_SEMANTIC_MATCHING", "false")

    def call(make: SessionMaker) -> Result:
        async def prepare() -> str:
            async with open_runtime(AptixSettings(load_plugins=False)) as runtime:
                return await make(runtime, "local", "local")

        session_id = asyncio.run(prepare())
        return CliRunner().invoke(
            cli, ["tools", "call", "agent_hello_world", '{"name":"x"}', "--session-id", session_id]
        )

    return call
