"""A database that refuses the server's writes: 503 ``database_refused`` naming why, one line
at start-up, never a 500 or a traceback.

On real PostgreSQL with a real role granted ``SELECT`` only, and a role whose transactions
are read-only; on a SQLite file opened read-only.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from typer.testing import CliRunner

from aptix.api import create_app
from aptix.cli.main import app as cli
from aptix.db.engine import WRITE_RIGHTS_HINT, open_database
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.telemetry import OtelTracing
from aptix.testing import FunctionModel, ScriptedModel, call, reply
from tests.databases import PG_HOST, PG_PORT, PG_USER, create_pg_database, drop_pg_database

AUTHORING = "/v1/tools/agent_workflow_authoring/invoke"
DRAFT = {
    "operation": "draft_workflow",
    "workflowId": "refused",
    "title": "Refused",
    "description": "A draft the database refuses.",
}
_DEPLOYMENT = (Path(__file__).resolve().parents[2] / "docs" / "deployment.md").read_text()
#: The SQL docs/deployment.md gives for a serving role (``aptix_app`` on database ``aptix``).
DOCUMENTED_GRANTS = re.findall(
    r"^GRANT .*;$",
    _DEPLOYMENT.split("## The PostgreSQL role and schema", 1)[1].split("```")[1],
    re.M,
)
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
TAIL = (
    "the server's database role lacks a right it needs, or the database is read-only. "
    "Retrying will not help until an operator fixes that."
)


@dataclass(frozen=True)
class Role:
    """A login role on a migrated database: its URL, and the owner's to change its rights."""

    name: str
    url: str
    owner_url: str

    async def admin(self, *statements: str) -> None:
        conn = await asyncpg.connect(self.owner_url.replace("+asyncpg", ""), timeout=10)
        try:
            for statement in statements:
                await conn.execute(statement)
        finally:
            await conn.close()

    async def grant_the_documented_rights(self) -> None:
        """Run the GRANTs docs/deployment.md lists for a serving role, as the owner."""
        database = self.owner_url.rsplit("/", 1)[-1]
        await self.admin(
            *(
                line.replace("aptix_app", f'"{self.name}"').replace(
                    "DATABASE aptix ", f'DATABASE "{database}" '
                )
                for line in DOCUMENTED_GRANTS
            )
        )


def _settings(tmp_path: Path, url: str) -> AptixSettings:
    return AptixSettings(
        data_dir=tmp_path, database_url=url, load_plugins=False, semantic_matching=False
    )


async def _admin_db(sql: str) -> None:
    conn = await asyncpg.connect(
        host=PG_HOST, port=PG_PORT, user=PG_USER, database="postgres", timeout=10
    )
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture
def reader() -> Iterator[Role]:
    """A role that may read every table of a database its owner migrated, and write none."""
    owner_url = create_pg_database()
    name = f"aptix_test_{uuid.uuid4().hex[:12]}"
    database = owner_url.rsplit("/", 1)[-1]
    role = Role(name, owner_url.replace(f"{PG_USER}@", f"{name}@", 1), owner_url)

    async def setup() -> None:
        await (await open_database(owner_url)).close()  # migrated by its owner
        await _admin_db(f'CREATE ROLE "{name}" LOGIN')
        await role.admin(
            f'GRANT CONNECT ON DATABASE "{database}" TO "{name}"',
            f'GRANT USAGE ON SCHEMA public TO "{name}"',
            f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{name}"',
        )

    try:
        asyncio.run(setup())
        yield role
    finally:
        drop_pg_database(owner_url)  # its grants go with it
        asyncio.run(_admin_db(f'DROP ROLE IF EXISTS "{name}"'))


async def _hold_a_turn(tmp_path: Path, url: str) -> dict[str, Any]:
    """Run a turn that waits for the user's approval; the request body that answers it."""
    approval = call("request_user_approval", {"prompt": "May I?", "action": "delete"})
    async with open_runtime(_settings(tmp_path, url)) as runtime:
        app = create_app(runtime=runtime, model=ScriptedModel.of(reply(None, approval)))
        async with _client(app) as client:
            held = await client.post("/v1/agent/execute", json={"instruction": "Ask me first."})
    assert held.status_code == 200, held.text
    assert held.json()["kind"] == "tool-only", held.text
    answer = {"callId": held.json()["toolCalls"][0]["callId"], "result": {"approved": True}}
    return {"sessionId": held.json()["sessionId"], "toolResults": [answer]}


def _client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


def _mcp(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


def _mcp_result(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    text = answer.text
    if answer.headers["content-type"].startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    result: dict[str, Any] = json.loads(text)["result"]
    return result


def _refused(answer: httpx.Response, reason: str) -> None:
    assert answer.status_code == 503, answer.text
    assert "retry-after" not in answer.headers  # only an operator ends it
    assert answer.json()["error"] == {
        "code": "database_refused",
        "message": f"The database refused the server's statement ({reason}): {TAIL}",
    }


async def test_a_role_that_may_only_read_answers_503_naming_the_table_and_logs_it_once(
    reader: Role, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    resume = await _hold_a_turn(tmp_path, reader.owner_url)
    model = ScriptedModel.of(reply("Done."))
    app = create_app(_settings(tmp_path, reader.url), model=model)  # /mcp too
    async with app.router.lifespan_context(app), _client(app) as client:
        sessions = "permission denied for table sessions"
        _refused(await client.post("/v1/sessions", json={}), sessions)
        _refused(await client.post("/v1/agent/execute", json={"instruction": "hi"}), sessions)
        _refused(await client.post("/v1/agent/execute", json=resume), sessions)
        heads = "permission denied for table workflow_heads"
        _refused(await client.post(AUTHORING, json={"arguments": DRAFT}), heads)
        over_mcp = _mcp_result(
            await client.post(
                "/mcp", json=_mcp("agent_workflow_authoring", DRAFT), headers=MCP_HEADERS
            )
        )
        assert over_mcp["isError"] is True
        assert over_mcp["content"][0]["text"] == (
            f"The database refused the server's statement ({heads}): {TAIL}"
        )
        read = await client.get(f"/v1/sessions/{resume['sessionId']}")
        assert read.status_code == 200, read.text
        assert read.json()["turns"][-1]["status"] == "pending"  # nothing was written

        await reader.grant_the_documented_rights()
        resumed = await client.post("/v1/agent/execute", json=resume)
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["text"] == "Done."
        # The documented rights are all it needs (rows with sequence-numbered ids included).
        created = await client.post("/v1/sessions", json={})
        assert created.status_code == 201, created.text
        drafted = await client.post(AUTHORING, json={"arguments": DRAFT})
        assert drafted.status_code == 200, drafted.text
        assert drafted.json()["result"]["ok"] is True, drafted.text
    model.assert_complete()

    log = capfd.readouterr().err
    # One ERROR per reason and surface, naming the table, without a traceback.
    refusals = [
        re.sub(r"^.*? (\w+) aptix \[\w*\] ", r"\1 ", line).split(";")[0]
        for line in log.splitlines()
        if "_Database__Refused]" in line
    ]
    said = "The database refused a statement (permission denied for table"
    assert refusals == [
        f"ERROR [HttpApi_Database__Refused] {said} sessions)",
        f"ERROR [HttpApi_Database__Refused] {said} workflow_heads)",
        f"ERROR [Mcp_Database__Refused] {said} workflow_heads)",
    ]
    assert "Traceback" not in log
    assert "[HttpApi_Request__Exception]" not in log


async def test_a_database_in_read_only_transactions_answers_503_database_refused(
    reader: Role, tmp_path: Path
) -> None:
    await reader.grant_the_documented_rights()
    await reader.admin(f'ALTER ROLE "{reader.name}" SET default_transaction_read_only = on')
    async with open_runtime(_settings(tmp_path, reader.url)) as runtime:
        app = create_app(runtime=runtime)
        async with _client(app) as client:
            answer = await client.post("/v1/sessions", json={})
    _refused(answer, "cannot execute INSERT in a read-only transaction")


async def test_a_sqlite_file_opened_read_only_answers_503_database_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "aptix.db"
    await (await open_database(f"sqlite+aiosqlite:///{path}")).close()
    read_only = f"sqlite+aiosqlite:///file:{path}?mode=ro&uri=true"
    async with open_runtime(_settings(tmp_path, read_only)) as runtime:
        app = create_app(runtime=runtime)
        async with _client(app) as client:
            listed = await client.get("/v1/sessions")
            answer = await client.post("/v1/sessions", json={})
    assert listed.status_code == 200, listed.text
    # Not an outage ("retry shortly"): the file will not take writes until it is reopened.
    _refused(answer, "attempt to write a readonly database")


def test_start_up_with_a_role_that_may_only_read_and_a_turn_left_running_is_one_line(
    reader: Role, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def leave_a_turn_running() -> None:
        await _hold_a_turn(tmp_path, reader.owner_url)
        # As a process that died mid-turn leaves it: running, its lease long gone.
        await reader.admin(
            "UPDATE turns SET status = 'running', lease_until = now() - interval '1 hour'"
        )

    asyncio.run(leave_a_turn_running())
    for name in list(os.environ):
        if name.startswith("APTIX_"):
            monkeypatch.delenv(name)
    env = {
        "APTIX_DATABASE_URL": reader.url,
        "APTIX_DATA_DIR": str(tmp_path),
        "APTIX_SEMANTIC_MATCHING": "false",
        "APTIX_LOAD_PLUGINS": "false",
    }
    listed = CliRunner().invoke(cli, ["sessions", "list"], env=env)
    served = subprocess.run(
        [sys.executable, "-m", "aptix", "serve", "--port", "0"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    for code, stderr in ((listed.exit_code, listed.stderr), (served.returncode, served.stderr)):
        assert code == 2, stderr
        assert "Traceback" not in stderr
        lines = stderr.strip().splitlines()
        assert len(lines) == 1, stderr
        assert lines[0].startswith("error: Cannot open the database at postgresql"), stderr
        assert lines[0].endswith(f": permission denied for table turns — {WRITE_RIGHTS_HINT}")


async def test_a_turn_whose_writes_are_refused_while_it_runs_ends_database_refused(
    reader: Role, tmp_path: Path
) -> None:
    await reader.grant_the_documented_rights()

    async def revoke_then_call(request: LlmRequest) -> LlmResponse:
        # An operator takes the rights away while the model answers.
        await reader.admin(
            f'REVOKE INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public FROM "{reader.name}"'
        )
        return reply(None, call("agent_calculator", {"expression": "6*7"}))

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings = _settings(tmp_path, reader.url)
    async with open_runtime(settings, tracing=OtelTracing(provider)) as runtime:
        app = create_app(runtime=runtime, model=FunctionModel(revoke_then_call))
        async with _client(app) as client:
            sid = (await client.post("/v1/sessions", json={})).json()["sessionId"]
            told = await client.post(
                "/v1/agent/execute", json={"sessionId": sid, "instruction": "go"}
            )
            read = await client.get(f"/v1/sessions/{sid}")
    _refused(told, "permission denied for table turns")
    assert read.status_code == 200, read.text
    [turn] = read.json()["turns"]
    assert turn["status"] == "error"
    assert turn["error"]["code"] == "database_refused"
    assert turn["warnings"][-1].startswith("Ended because the database refused a statement")
    [span] = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent aptix"]
    assert (span.attributes or {})["error.type"] == "database_refused"


OWN_READ_ONLY_SQLITE = """
import sqlite3
from contextlib import closing
from typing import Any, ClassVar

from aptix import AgentTool, InvokeResult
from aptix.tools import function_schema
from aptix.tools.args import ToolArgs


class _NoArgs(ToolArgs):
    pass


class NotesTool(AgentTool):
    TOOL_NAME: ClassVar[str] = "own_notes"
    TOOL_USAGE_METADATA: ClassVar[str] = "Call this tool to keep a note."

    def __init__(self, logger: Any) -> None:
        self.logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        return function_schema(cls.TOOL_NAME, "Keeps a note.", _NoArgs)

    async def execute(self, arguments_json: str, context: Any) -> InvokeResult[str]:
        with closing(sqlite3.connect("file:NOTES?mode=ro", uri=True)) as connection:
            connection.execute("INSERT INTO notes VALUES ('hi')")
        return InvokeResult.create('"kept"')
"""


async def test_a_class_tool_refused_by_its_own_sqlite_file_fails_as_the_tool(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # Its SQLITE_READONLY is the one Aptix's read-only file raises: it answered 503
    # database_refused and told the operator to grant Aptix's role rights, with no traceback.
    notes = tmp_path / "notes.db"
    with closing(sqlite3.connect(notes)) as connection:
        connection.execute("CREATE TABLE notes (text TEXT)")
    module = tmp_path / "own_notes.py"
    module.write_text(OWN_READ_ONLY_SQLITE.replace("NOTES", str(notes)))
    settings = _settings(tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'aptix.db'}")
    settings = settings.model_copy(update={"tool_modules": [str(module)]})
    failed = "The tool 'own_notes' failed unexpectedly. The error has been logged."
    app = create_app(settings)  # /mcp too
    async with app.router.lifespan_context(app), _client(app) as client:
        invoked = await client.post("/v1/tools/own_notes/invoke", json={"arguments": {}})
        over_mcp = _mcp_result(
            await client.post("/mcp", json=_mcp("own_notes", {}), headers=MCP_HEADERS)
        )
    assert invoked.status_code == 200, invoked.text
    assert invoked.json()["successful"] is False
    assert invoked.json()["errors"] == [{"message": failed}]
    assert over_mcp["isError"] is True
    assert over_mcp["content"][0]["text"] == failed
    log = capfd.readouterr().err
    assert log.count("[own_notes_ExecuteAsync__Exception]") == 2, log
    assert "attempt to write a readonly database" in log  # the tool's own error, logged
    assert "_Database__Refused]" not in log
