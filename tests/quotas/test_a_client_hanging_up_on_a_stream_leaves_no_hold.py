"""A client that hangs up on a streamed chat completion leaves no token-budget hold behind.

End to end: ``aptix serve`` with the real Redis (keys under the test's own prefix), the
scripted model of :mod:`aptix.testing`, and the real ``openai`` client, which reads the
first chunk and closes the stream. The turn is cancelled as it begins; about one time in
three that was while its hold's take waited for Redis, and the hold stayed counted for the
budget's window and listed as a call in progress for 15 minutes (review r4 F1, round 70).
Here it is so every time: Redis is reached through a forwarder that lets the take through
and keeps its answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from pathlib import Path

import httpx
import pytest
import redis
from openai import AsyncOpenAI

from aptix.testing import reply
from aptix.testing.server import Hold, ScriptedOpenAIServer
from tests.api.live import scripted_model_env, serve_isolated
from tests.quotas.conftest import REDIS_HOST, REDIS_PORT

REDIS_DB = 0
BUDGET = 1_000_000


class TakeKeeper:
    """Forwards ``127.0.0.1:port`` to Redis; keeps the answer to the first take of a hold.

    A take is the script call naming the org's list of holds with the list's 15-minute
    lifetime (``900000`` ms): only a take does before the call it holds for ends.
    """

    def __init__(self, holds_key: str) -> None:
        self._marks = (holds_key.encode(), b"$6\r\n900000\r\n")
        self.taken = threading.Event()  # Redis has answered the take (and the answer is kept)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        self._writers: set[asyncio.StreamWriter] = set()

    async def _start(self) -> asyncio.Server:
        return await asyncio.start_server(self._handle, "127.0.0.1", 0)

    def close(self) -> None:
        async def stop() -> None:
            self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(REDIS_HOST, REDIS_PORT)
        self._writers.update((writer, up_writer))
        keeping = False

        async def requests() -> None:
            nonlocal keeping
            with contextlib.suppress(OSError):
                while data := await reader.read(65_536):
                    if not self.taken.is_set() and all(mark in data for mark in self._marks):
                        keeping = True
                    up_writer.write(data)
                    await up_writer.drain()
            up_writer.transport.abort()

        async def answers() -> None:
            with contextlib.suppress(OSError):
                while data := await up_reader.read(65_536):
                    if keeping:
                        self.taken.set()  # Redis ran the take; its caller never hears of it
                        continue
                    writer.write(data)
                    await writer.drain()
            writer.transport.abort()

        await asyncio.gather(requests(), answers())


def _live_holds(prefix: str) -> int:
    """The holds Redis lists as model calls in progress for the org ``local``."""
    client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=REDIS_DB)
    try:
        now_ms = int(time.time() * 1000)
        return int(client.zcount(f"{prefix}:holds:local", now_ms, "+inf"))
    finally:
        client.close()


async def _ended(api: httpx.AsyncClient, sid: str, count: int) -> list[str]:
    """The statuses of the session's turns, once ``count`` of them have ended."""
    for _ in range(500):
        turns = (await api.get(f"/v1/sessions/{sid}")).json()["turns"]
        statuses = [turn["status"] for turn in turns]
        if len(statuses) == count and "running" not in statuses:
            return statuses
        await asyncio.sleep(0.02)
    raise AssertionError(f"the turns did not end: {statuses}")


@pytest.mark.parametrize("upstream", ["chat", "responses"])
async def test_a_client_hanging_up_on_a_stream_leaves_no_hold(
    tmp_path: Path, prefix: str, upstream: str
) -> None:
    keeper = TakeKeeper(f"{prefix}:holds:local")
    llm = ScriptedOpenAIServer(
        [Hold(reply("one two three four five"), after_words=2), reply("Done.")]
    ).start()
    env = {
        **scripted_model_env(llm.base_url),
        "APTIX_LLM_API": upstream,
        "APTIX_REDIS_URL": f"redis://127.0.0.1:{keeper.port}/{REDIS_DB}",
        "APTIX_REDIS_KEY_PREFIX": prefix,
        "APTIX_TOKEN_BUDGET": f"{BUDGET}/day",
    }
    try:
        with serve_isolated(tmp_path, tmp_path / "serve.log", **env) as (url, _):
            async with (
                httpx.AsyncClient(base_url=url, timeout=30) as api,
                AsyncOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0) as client,
            ):
                sid = (await api.post("/v1/sessions", json={})).json()["sessionId"]
                model = (await api.get("/v1/models")).json()["data"][0]["id"]
                ask = {"model": model, "extra_headers": {"X-Aptix-Session": sid}}

                # Hung up as the turn begins: while Redis has taken its hold, unanswered.
                stream = await client.chat.completions.create(
                    **ask, messages=[{"role": "user", "content": "hello"}], stream=True
                )
                first = await stream.__anext__()
                assert first.choices[0].delta.role == "assistant"
                assert await asyncio.to_thread(keeper.taken.wait, 30)
                await stream.close()
                assert await _ended(api, sid, 1) == ["cancelled"]
                assert llm.requests == []  # the model was never asked

                # Hung up once the model has streamed words: charged what it streamed.
                stream = await client.chat.completions.create(
                    **ask, messages=[{"role": "user", "content": "count"}], stream=True
                )
                async for chunk in stream:
                    if chunk.choices and chunk.choices[0].delta.content:
                        break
                await stream.close()
                assert await _ended(api, sid, 2) == ["cancelled", "cancelled"]

                # Read to its end.
                done = await client.chat.completions.create(
                    **ask, messages=[{"role": "user", "content": "again"}]
                )
                assert done.choices[0].message.content == "Done."

                usage = (await api.get("/v1/usage")).json()
        # Each hold was settled or given back: the budget counts what /v1/usage records.
        assert usage["modelCalls"] == 2
        assert BUDGET - usage["limits"]["tokenBudget"]["remaining"] == usage["totalTokens"]
        assert _live_holds(prefix) == 0
    finally:
        llm.stop()
        keeper.close()
