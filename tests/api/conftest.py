from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from openai import AsyncOpenAI

from aptix.api import create_app
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel
from aptix.testing.server import ScriptedOpenAIServer

KEYS = "key-a=acme:ann,key-b=globex:bob"
A = {"Authorization": "Bearer key-a"}
B = {"Authorization": "Bearer key-b"}


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
def model_server() -> Iterator[ScriptedOpenAIServer]:
    """A scripted OpenAI-compatible server on 127.0.0.1 that records what it was asked."""
    with ScriptedOpenAIServer() as server:
        yield server


def scripted_settings(
    data_dir: Path, database_url: str | None, server: ScriptedOpenAIServer
) -> AptixSettings:
    """Settings whose model is ``server``, reached by the real client: no plugins, no retry."""
    return AptixSettings(
        data_dir=data_dir,
        database_url=database_url,
        load_plugins=False,
        semantic_matching=False,
        llm_base_url=server.base_url,
        llm_model="scripted",
        llm_max_retries=0,
    )


@pytest.fixture
async def keyed_runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = AptixSettings(
        data_dir=tmp_path, load_plugins=False, api_keys=KEYS, max_body_bytes=10_000
    )
    async with open_runtime(settings) as runtime:
        yield runtime


@pytest.fixture
async def client(keyed_runtime: Runtime, model: ScriptedModel) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(runtime=keyed_runtime, model=model)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test", headers=A) as c:
        yield c


@pytest.fixture
async def demo_client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """The API of a server whose model is the built-in demo, with no keys and no plugins."""
    settings = AptixSettings(
        data_dir=tmp_path, load_plugins=False, semantic_matching=False, llm_model="demo"
    )
    async with open_runtime(settings) as runtime:
        transport = httpx.ASGITransport(app=create_app(runtime=runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            yield c


@pytest.fixture
async def no_model_client(runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(runtime=runtime)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        yield c


@pytest.fixture
async def openai_client(keyed_runtime: Runtime, model: ScriptedModel) -> AsyncIterator[AsyncOpenAI]:
    """The OpenAI SDK on the keyed app, as key-a, without the SDK's own retries."""
    app = create_app(runtime=keyed_runtime, model=model)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test/v1", headers=A) as h:
        yield AsyncOpenAI(api_key="key-a", base_url="http://test/v1", http_client=h, max_retries=0)
