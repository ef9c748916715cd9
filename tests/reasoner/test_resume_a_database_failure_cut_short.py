"""A resume the database cuts short before any of its calls ran waits for the same results.

docs/http-api.md ("Turns"): such a resume answers 503 ``database_unavailable`` with
``Retry-After`` because none of its calls ran, and the SDKs send a 5xx again by themselves.
The turn ended ``error``, so the retry got that ending replayed (or, on
/v1/chat/completions, 409 ``tool_results_already_posted``) and never resumed it (review s1
F1). The turn now waits again as the resume found it, the results stored and nothing run, as
after a failed model call: the retry continues it, whether the ending was stored within the
save's retries or only kept in the process (``ledger.ENDED_HERE``). Results posted again
after a failure that ended their resume once its calls ran replay that ending without saying
that the repeat would run them again (F2). On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI
from sqlalchemy import exc as sa

from aptix.api import create_app
from aptix.db.outage import DatabaseRefused
from aptix.db.types import utc_now
from aptix.llm import LlmRequest, LlmResponse
from aptix.reasoner import AgentReasoner, call_states, claims, endings, ledger
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, call, reply
from tests.databases import (
    create_pg_database,
    drop_pg_database,
    pg_admin,
)
from tests.reasoner.gated import RUNS, Wipe

#: The pauses between the tries to store a broken turn's ending, as served.
PAUSES = endings.SAVE_RETRY_SECONDS
EXECUTE = "/v1/agent/execute"
HEADER = "X-Aptix-Session"
#: Writes failing until the ending lands on its last try: the read after the model's
#: answer, then all but the last of the ending's tries (SAVE_RETRY_SECONDS has three pauses).
SHORT = 1 + 3
#: Failing until the test brings the database back: the ending is kept in the process only.
LONG = 10**6
READ_ONLY = "cannot execute UPDATE in a read-only transaction"


def _outage() -> Exception:
    """What a statement meets on a pooled connection a PostgreSQL restart closed."""
    closed = Exception("the underlying connection is closed")
    return sa.InterfaceError("UPDATE turns", None, closed, connection_invalidated=True)


class Outage:
    """The turn store's database: up, or failing its next ``left`` statements with ``error``."""

    def __init__(self, runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
        self.left = 0
        self.error = _outage
        store = runtime.turns
        for name in ("claim", "save", "settle", "read_session", "list_turns", "status"):
            monkeypatch.setattr(store, name, self._failing(getattr(store, name)))

    def _failing(self, method: Callable[..., Any]) -> Callable[..., Any]:
        async def statement(*args: Any, **kwargs: Any) -> Any:
            if self.left > 0:
                self.left -= 1
                raise self.error()
            return await method(*args, **kwargs)

        return statement


@pytest.fixture(autouse=True)
def _quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(endings, "SAVE_RETRY_SECONDS", (0.0, 0.0, 0.0))
    RUNS.clear()


@pytest.fixture
async def runtime(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    settings = AptixSettings(data_dir=tmp_path, database_url=database_url, load_plugins=False)
    async with open_runtime(settings) as opened:
        # The test tool is offered below, not by a mode: the mode guard stays out.
        monkeypatch.setattr(opened.executor, "_guard", None)
        opened.registry.register(Wipe)
        yield opened


@pytest.fixture
def outage(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> Outage:
    return Outage(runtime, monkeypatch)


class Script:
    """The model: asks for ``first``, then answers each resume with the next of ``answers``.

    The database goes down for ``down`` statements (0: none) as its first answer leaves.
    """

    def __init__(self, outage: Outage, first: str, down: int, *answers: str) -> None:
        self.outage, self.first, self.down = outage, first, down
        self.answers = list(answers or ("Thanks, done.", "Thanks (retry)."))
        self.answered = 0

    def __call__(self, request: LlmRequest) -> LlmResponse:
        if request.messages[-1].get("role") != "tool":
            name = self.first
            arguments = {"prompt": "ok?"} if name == "request_user_approval" else {}
            return reply(None, call(name, arguments, id="c1"))
        self.answered += 1
        if self.answered == 1:
            self.outage.left = self.down
        return reply(self.answers.pop(0))


class Unreachable:
    """The session's read before a resume runs its approved calls, failing once.

    That read releases an active workflow no longer served; the database is gone by then,
    and stays down for ``down`` statements in all.
    """

    def __init__(self, reasoner: AgentReasoner, outage: Outage, down: int) -> None:
        self.release, self.outage, self.down = reasoner._release_workflow, outage, down
        self.failed = False

    async def __call__(self, session: Any) -> Any:
        if not self.failed:
            self.failed = True
            self.outage.left = self.down - 1
            raise _outage()
        assert self.release is not None
        return await self.release(session)


@contextlib.asynccontextmanager
async def _served(
    runtime: Runtime, model: FunctionModel
) -> AsyncIterator[tuple[httpx.AsyncClient, AgentReasoner]]:
    app = create_app(runtime=runtime, model=model)
    reasoner: AgentReasoner = app.state.reasoner
    reasoner._offered = lambda _w, tools, _o: [*tools, "wipe"]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client, reasoner


async def _session(api: httpx.AsyncClient, instruction: str) -> tuple[str, dict[str, Any]]:
    sid = (await api.post("/v1/sessions", json={})).json()["sessionId"]
    asked = await api.post(EXECUTE, json={"sessionId": sid, "instruction": instruction})
    assert asked.json()["kind"] == "tool-only", asked.text
    return sid, asked.json()


def _answer(sid: str, result: Any) -> dict[str, Any]:
    return {"sessionId": sid, "toolResults": [{"callId": "c1", "result": result}]}


async def _turn(api: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    [turn] = (await api.get(f"/v1/sessions/{sid}")).json()["turns"]
    return dict(turn)


def _said(request: LlmRequest) -> list[tuple[str, Any]]:
    return [(m["role"], m.get("content")) for m in request.messages if m["role"] != "system"]


def _listed(answer: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["callId"], c["outcome"]) for c in answer["toolCalls"]]


@pytest.mark.parametrize("down", [SHORT, LONG], ids=["stored", "kept_here"])
async def test_the_results_sent_again_continue_a_resume_an_outage_cut_short(
    runtime: Runtime, outage: Outage, down: int
) -> None:
    model = FunctionModel(Script(outage, "request_user_approval", down))
    async with _served(runtime, model) as (api, _):
        sid, _asked = await _session(api, "ask me")
        resume = _answer(sid, "yes")
        cut = await api.post(EXECUTE, json=resume)
        assert cut.status_code == 503, cut.text
        assert cut.json()["error"]["code"] == "database_unavailable"
        assert cut.headers["Retry-After"] == "5"
        outage.left = 0  # the database is back
        [stored] = await runtime.turns.list_turns(sid, "local")
        # Stored within the save's retries, or kept here: either way it reads waiting again.
        assert stored.status == ("pending" if down == SHORT else "running")
        waiting = await _turn(api, sid)
        assert waiting["status"] == "pending", waiting
        assert waiting["text"] is None  # the answer of the attempt cut short is not the turn's
        assert [(c["callId"], c["state"]) for c in waiting["pendingCalls"]] == [("c1", "succeeded")]
        assert len(waiting["modelCalls"]) == 2  # the attempt's model call was made

        again = await api.post(EXECUTE, json=resume)
        assert again.status_code == 200, again.text
        assert (again.json()["kind"], again.json()["text"]) == ("ok", "Thanks (retry).")
        # The model reads the stored result once, and nothing of the attempt cut short.
        assert _said(model.requests[-1]) == [
            ("user", "ask me"),
            ("assistant", None),
            ("tool", "yes"),
        ]
        done = await _turn(api, sid)
        assert (done["status"], done["text"]) == ("completed", "Thanks (retry).")
        replayed = await api.post(EXECUTE, json=resume)
        assert replayed.json() == again.json()
    assert len(model.requests) == 3


@pytest.mark.parametrize("down", [1, LONG], ids=["stored", "kept_here"])
async def test_a_resume_the_database_refused_waits_until_its_rights_are_back(
    runtime: Runtime, outage: Outage, down: int
) -> None:
    # docs/http-api.md: "a turn waiting for the client stays pending and can be answered
    # once the rights are back". A refusal is not retried: the ending is stored only when
    # the read after the model's answer was the one refused.
    outage.error = lambda: DatabaseRefused(READ_ONLY)
    model = FunctionModel(Script(outage, "request_user_approval", down))
    async with _served(runtime, model) as (api, _):
        sid, _asked = await _session(api, "ask me")
        resume = _answer(sid, "yes")
        refused = await api.post(EXECUTE, json=resume)
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "database_refused"
        outage.left = 0  # the rights are back
        assert (await _turn(api, sid))["status"] == "pending"
        again = await api.post(EXECUTE, json=resume)
        assert (again.json()["kind"], again.json()["text"]) == ("ok", "Thanks (retry)."), again.text


@pytest.mark.parametrize("down", [SHORT, LONG], ids=["stored", "kept_here"])
async def test_an_approved_call_the_outage_kept_from_starting_runs_once_on_the_retry(
    runtime: Runtime, outage: Outage, down: int
) -> None:
    model = FunctionModel(Script(outage, "wipe", 0, "Wiped."))
    async with _served(runtime, model) as (api, reasoner):
        sid, _asked = await _session(api, "wipe")
        reasoner._release_workflow = Unreachable(reasoner, outage, down)
        approve = _answer(sid, {"approved": True})
        cut = await api.post(EXECUTE, json=approve)
        assert cut.status_code == 503, cut.text
        assert RUNS == []
        outage.left = 0
        waiting = await _turn(api, sid)
        assert waiting["status"] == "pending"
        [wipe] = waiting["toolCalls"]
        # Approved and on record, not started: nothing says it may have run.
        assert (wipe["state"], wipe["outcome"], wipe["wasExecuted"]) == (
            "approved",
            "pending",
            False,
        )
        again = await api.post(EXECUTE, json=approve)
        assert again.status_code == 200, again.text
        assert (again.json()["kind"], again.json()["text"]) == ("ok", "Wiped.")
        assert _listed(again.json()) == [("c1", "succeeded")]
        assert (await api.post(EXECUTE, json=approve)).json() == again.json()
    assert RUNS == ["wipe"]


@pytest.mark.parametrize("down", [SHORT, LONG], ids=["stored", "kept_here"])
async def test_an_approved_call_a_cancel_closes_before_it_started_reads_not_run(
    runtime: Runtime, outage: Outage, down: int
) -> None:
    # Kept here, the ending the outage kept from the database is what the cancel closes, as
    # reads showed it (review s4 F2): not the row's run, whose approval read "started".
    model = FunctionModel(Script(outage, "wipe", 0))
    async with _served(runtime, model) as (api, reasoner):
        sid, asked = await _session(api, "wipe")
        reasoner._release_workflow = Unreachable(reasoner, outage, down)
        assert (await api.post(EXECUTE, json=_answer(sid, {"approved": True}))).status_code == 503
        outage.left = 0
        shown = await _turn(api, sid)
        cancelled = await api.post(f"/v1/sessions/{sid}/turns/{asked['turnId']}/cancel")
        assert cancelled.json()["status"] == "cancelled", cancelled.text
        [wipe] = cancelled.json()["toolCalls"]
        assert (wipe["outcome"], wipe["wasExecuted"]) == ("failed", False)
        assert wipe["errorMessage"] == call_states.CANCELLED_BEFORE_START
        assert (await _turn(api, sid))["modelCalls"] == shown["modelCalls"]
    assert RUNS == []


@pytest.mark.parametrize("down", [SHORT, LONG], ids=["stored", "kept_here"])
async def test_the_chat_completion_sent_again_continues_the_resume(
    runtime: Runtime, outage: Outage, down: int
) -> None:
    # What the openai SDK sends again by itself after the 503 (max_retries > 0), sent by
    # hand here so as not to wait out its Retry-After.
    model = FunctionModel(Script(outage, "request_user_approval", down))
    async with _served(runtime, model) as (api, _):
        client = AsyncOpenAI(
            api_key="unused", base_url="http://127.0.0.1/v1", http_client=api, max_retries=0
        )
        messages: list[Any] = [{"role": "user", "content": "ask me"}]
        asked = await client.chat.completions.with_raw_response.create(
            model="aptix-general", messages=messages
        )
        sid = asked.headers[HEADER]
        handed = asked.parse().choices[0].message
        messages += [
            handed.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": "c1", "content": "yes"},
        ]
        with pytest.raises(openai.InternalServerError) as cut:
            await client.chat.completions.create(
                model="aptix-general", messages=messages, extra_headers={HEADER: sid}
            )
        assert cut.value.status_code == 503
        assert cut.value.response.headers["Retry-After"] == "5"
        outage.left = 0
        again = await client.chat.completions.create(
            model="aptix-general", messages=messages, extra_headers={HEADER: sid}
        )
        assert again.choices[0].message.content == "Thanks (retry)."
        assert (await _turn(api, sid))["status"] == "completed"


async def test_a_resume_kept_waiting_here_is_taken_over_elsewhere_once_its_lease_ran_out(
    runtime: Runtime, outage: Outage
) -> None:
    # Another process knows nothing of the ending kept here: it finds the turn running and
    # takes it over once its lease ran out, as after a crash. The approved call reads unknown
    # there, so it is not run; and this process does not take the new run for its old one.
    model = FunctionModel(Script(outage, "wipe", 0, "Not wiped."))
    async with _served(runtime, model) as (api, reasoner):
        sid, _asked = await _session(api, "wipe")
        reasoner._release_workflow = Unreachable(reasoner, outage, LONG)
        approve = _answer(sid, {"approved": True})
        assert (await api.post(EXECUTE, json=approve)).status_code == 503
        outage.left = 0
        [stored] = await runtime.turns.list_turns(sid, "local")
        assert stored.status == "running"
        kept_here = ledger.ENDED_HERE.pop(stored.id)  # as the other process sees the turn
        busy = await api.post(EXECUTE, json=approve)
        assert (busy.status_code, busy.json()["error"]["code"]) == (409, "session_busy")
        with pytest.MonkeyPatch.context() as lease:
            lease.setattr(claims, "_owner_gone", lambda owner: True)  # its lease ran out
            there = await api.post(EXECUTE, json=approve)
        assert there.status_code == 200, there.text
        assert (there.json()["text"], _listed(there.json())) == ("Not wiped.", [("c1", "unknown")])
        ledger.ENDED_HERE[stored.id] = kept_here  # this process again, with its old run's ending
        done = await _turn(api, sid)
        assert (done["status"], done["text"]) == ("completed", "Not wiped.")
        assert (await api.post(EXECUTE, json=approve)).json() == there.json()
    assert RUNS == []


async def test_a_resume_kept_waiting_here_is_not_mistaken_for_its_retry_while_that_runs(
    runtime: Runtime, outage: Outage
) -> None:
    # The ending kept here names the run it ended: the retry's run is another one, and reads
    # running while it runs, not as that old ending.
    seen: list[str] = []
    script = Script(outage, "request_user_approval", LONG)

    async def answer(request: LlmRequest) -> LlmResponse:
        if script.answered == 1:
            [turn] = await runtime.turns.list_turns(sid, "local")
            seen.append("dead" if claims.is_dead(turn, utc_now()) else turn.status)
        return script(request)

    async with _served(runtime, FunctionModel(answer)) as (api, _):
        sid, _asked = await _session(api, "ask me")
        resume = _answer(sid, "yes")
        assert (await api.post(EXECUTE, json=resume)).status_code == 503
        outage.left = 0
        again = await api.post(EXECUTE, json=resume)
        assert again.json()["text"] == "Thanks (retry).", again.text
    assert seen == ["running"]


@pytest.mark.parametrize("down", [SHORT, LONG], ids=["stored", "kept_here"])
async def test_results_posted_again_after_an_outage_ended_their_resume_are_told_it_ran_nothing(
    runtime: Runtime, outage: Outage, down: int
) -> None:
    # The approved call ran, then the database failed: the first answer says that sending
    # it again would run it again; the repeat, which runs nothing, is not told so (F2).
    model = FunctionModel(Script(outage, "wipe", down, "Wiped."))
    async with _served(runtime, model) as (api, _):
        sid, _asked = await _session(api, "wipe")
        approve = _answer(sid, {"approved": True})
        first = await api.post(EXECUTE, json=approve)
        assert first.status_code == 200, first.text
        assert first.json()["kind"] == "error"
        assert endings.CALLS_RAN in first.json()["error"]
        outage.left = 0
        for streamed in (False, True):
            again = await api.post(EXECUTE, json={**approve, "stream": streamed})
            assert again.status_code == 200, again.text
            assert endings.CALLS_RAN not in again.text
            assert "would run them again" not in again.text
            assert "this post ran nothing" in again.text
        body = (await api.post(EXECUTE, json=approve)).json()
        assert (body["kind"], body["errorCode"]) == ("error", "database_unavailable")
        assert _listed(body) == [("c1", "succeeded")]
        assert body["error"].endswith(claims.CALLS_RAN_REPLAYED)
        assert all(endings.CALLS_RAN not in w for w in body["warnings"])
        # The turn's record keeps what the first answer said.
        assert (await _turn(api, sid))["error"]["message"] == first.json()["error"]
    assert RUNS == ["wipe"]


@pytest.fixture
async def own_pg() -> AsyncIterator[str]:
    """A PostgreSQL database of this test's own, which it takes down and brings back."""
    url = await asyncio.to_thread(create_pg_database)
    try:
        yield url
    finally:
        name = url.rsplit("/", 1)[-1]
        await pg_admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        await asyncio.to_thread(drop_pg_database, url)


@pytest.mark.parametrize("seconds", [1.0, 5.0], ids=["stored", "kept_here"])
async def test_a_postgresql_refusing_connections_while_the_model_answers_a_resume(
    own_pg: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seconds: float
) -> None:
    # The reviewer's steps: the database refuses connections (and its sessions are ended)
    # while the model answers the resume, and is back ``seconds`` later: within the ending's
    # retries (3.5 s), or after them. The retry once it is back continues the turn.
    monkeypatch.setattr(endings, "SAVE_RETRY_SECONDS", PAUSES)
    name = own_pg.rsplit("/", 1)[-1]
    asked, answer = asyncio.Event(), asyncio.Event()

    async def model(request: LlmRequest) -> LlmResponse:
        if request.messages[-1].get("role") != "tool":
            return reply(None, call("request_user_approval", {"prompt": "ok?"}, id="c1"))
        if not answer.is_set():
            asked.set()
            await answer.wait()
            return reply("Thanks, done.")
        return reply("Thanks (retry).")

    settings = AptixSettings(data_dir=tmp_path, database_url=own_pg, load_plugins=False)
    async with (
        open_runtime(settings) as runtime,
        _served(runtime, FunctionModel(model)) as (
            api,
            _,
        ),
    ):
        sid, _asked = await _session(api, "ask me")
        resume = _answer(sid, "yes")
        cut = asyncio.create_task(api.post(EXECUTE, json=resume))
        await asyncio.wait_for(asked.wait(), 30)
        await pg_admin(
            f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false',
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'",
        )
        answer.set()
        await asyncio.sleep(seconds)
        await pg_admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        refused = await asyncio.wait_for(cut, 30)
        assert refused.status_code == 503, refused.text
        assert refused.headers["Retry-After"] == "5"
        again = await api.post(EXECUTE, json=resume)
        assert again.status_code == 200, again.text
        assert (again.json()["kind"], again.json()["text"]) == ("ok", "Thanks (retry).")
        done = await _turn(api, sid)
        assert (done["status"], done["text"]) == ("completed", "Thanks (retry).")
