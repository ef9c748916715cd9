"""End to end: ``aptix serve`` in a subprocess, then schemathesis against its OpenAPI.

schemathesis runs as its own command line, as a user would run it: every check, every phase
(stateful included, its links inferred from the ``Location`` of creates), on SQLite and on
PostgreSQL with API keys, and on SQLite in the default keyless mode. CI runs 100 examples per
operation (``APTIX_CI``; a quarter keyless); ``APTIX_SCHEMATHESIS_EXAMPLES`` overrides the
count for a longer run by hand. The three servers start together and the three runs go at
once: each run and its server take turns on about one core, so together they use both of a
CI machine's cores (the three in a row took about as long as the suite's next ten files).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from aptix.testing.server import ScriptedOpenAIServer
from tests.api.live import Served, served
from tests.databases import create_pg_database, drop_pg_database

KEY = "live-key"
AUTH = {"Authorization": f"Bearer {KEY}"}

EXAMPLES_PER_OPERATION = int(
    os.environ.get("APTIX_SCHEMATHESIS_EXAMPLES") or (100 if os.environ.get("APTIX_CI") else 10)
)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Served]]:
    """Three ``aptix serve``: keyed on SQLite and on PostgreSQL, and keyless (no keys)."""
    # The scripted model has no answers: every turn ends as kind "error" (a 200), so that
    # schemathesis exercises the execute route without a real model.
    database = create_pg_database()
    settings = {
        "sqlite": {"APTIX_API_KEYS": f"{KEY}=acme:ann"},
        "postgresql": {"APTIX_API_KEYS": f"{KEY}=acme:ann", "APTIX_DATABASE_URL": database},
        # The default keyless mode (loopback only, no key): its document states no security.
        "keyless": {},
    }
    try:
        with ExitStack() as stack:
            processes = {
                name: served(
                    tmp_path_factory.mktemp(name),
                    APTIX_LLM_BASE_URL=stack.enter_context(ScriptedOpenAIServer()).base_url,
                    APTIX_LLM_MODEL="scripted",
                    APTIX_LLM_MAX_RETRIES="0",
                    APTIX_SEMANTIC_MATCHING="false",
                    **env,
                )
                for name, env in settings.items()
            }
            # Started together (each start waits on its own health check in a thread); every
            # one that started is stopped at the end, even if another failed to start.
            with ThreadPoolExecutor(len(processes)) as pool:
                starts = {name: pool.submit(p.__enter__) for name, p in processes.items()}
            running: dict[str, Served] = {}
            for name, start in starts.items():
                if start.exception() is None:
                    stack.push(processes[name])
                    running[name] = start.result()
            for start in starts.values():
                start.result()  # raises the first failure to start
            yield running
    finally:
        drop_pg_database(database)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_served_process_answers_health_tools_and_sessions(
    servers: dict[str, Served], backend: str
) -> None:
    live_url = servers[backend].url
    assert httpx.get(f"{live_url}/healthz").json()["status"] == "ok"
    invoked = httpx.post(
        f"{live_url}/v1/tools/agent_list_modes/invoke", json={"arguments": {}}, headers=AUTH
    ).json()
    assert invoked["successful"] is True
    assert invoked["result"]["modes"][0]["key"] == "general"
    created = httpx.post(f"{live_url}/v1/sessions", json={}, headers=AUTH)
    session = created.json()["sessionId"]
    assert created.headers["location"] == f"/v1/sessions/{session}"
    change = {"mode": "calculation", "branch": False, "reason": "numbers"}
    changed = httpx.post(
        f"{live_url}/v1/tools/agent_change_mode/invoke",
        json={"arguments": change, "sessionId": session},
        headers=AUTH,
    ).json()
    assert changed["result"]["mode"] == "calculation"
    bad = httpx.post(
        f"{live_url}/v1/sessions",
        content=b"{",
        headers={"content-type": "application/json", **AUTH},
    )
    assert bad.status_code == 422
    assert bad.json()["error"]["code"] == "invalid_request"


def test_schemathesis_all_checks_and_phases_find_nothing_keyed_and_keyless(
    servers: dict[str, Served], tmp_path: Path
) -> None:
    # Without keys the document requires no auth (schemathesis checks that nothing answers 401
    # where the document promises none) and schemathesis sends no key.
    document = httpx.get(f"{servers['keyless'].url}/openapi.json").json()
    assert "securitySchemes" not in document.get("components", {})
    runs = {
        "sqlite": (AUTH, EXAMPLES_PER_OPERATION),
        "postgresql": (AUTH, EXAMPLES_PER_OPERATION),
        # A quarter of the examples: the routes are the keyed runs' own; only the auth differs.
        "keyless": ({}, max(10, EXAMPLES_PER_OPERATION // 4)),
    }
    with ThreadPoolExecutor(len(runs)) as pool:
        checks = {
            name: pool.submit(_schemathesis, servers[name], tmp_path / name, headers, examples)
            for name, (headers, examples) in runs.items()
        }
    failures = [
        f"{name}: {check.exception()}" for name, check in checks.items() if check.exception()
    ]
    assert not failures, "\n\n".join(failures)


def _schemathesis(live: Served, tmp_path: Path, headers: dict[str, str], examples: int) -> None:
    live_url = live.url
    tmp_path.mkdir()
    report = tmp_path / "junit.xml"
    config = tmp_path / "schemathesis.toml"
    # The body limit (APTIX_MAX_BODY_BYTES, 413 before parsing) is a transport limit the schema
    # cannot state: 100,000 astral characters escaped in JSON take 1.2 MB. A 413 therefore
    # counts as a rejection, and as an acceptable answer to a body too large to accept. A 412
    # (an If-Match the current revision does not match) depends on state, as a 409 does.
    config.write_text(
        "[checks.negative_data_rejection]\n"
        'expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "415", '
        '"422", "428", "429", "5xx"]\n'
        "[checks.positive_data_acceptance]\n"
        'expected-statuses = ["2xx", "3xx", "401", "403", "404", "409", "412", "413", "429", '
        '"5xx"]\n'
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "--config-file",
            str(config),
            "run",
            f"{live_url}/openapi.json",
            "--checks",
            "all",
            "--phases",
            "examples,coverage,fuzzing,stateful",
            "--max-examples",
            str(examples),
            "--generation-database",
            "none",
            # NUL in any string is refused by design (422, see aptix.nul); JSON Schema cannot
            # say so for free-form tool arguments, so strings are generated without it.
            "--generation-allow-x00",
            "false",
            *(arg for name, value in headers.items() for arg in ("--header", f"{name}: {value}")),
            "--report",
            "junit",
            "--report-junit-path",
            str(report),
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    # A 5xx is explained by the server's own log, so a rare finding can be fixed from CI output.
    server_log = live.log.read_text(errors="replace")
    failures = (
        server_log[server_log.find("Traceback") :][-6000:] if "Traceback" in server_log else ""
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:] + failures
    # "N generated, N passed": every generated case passed.
    assert re.search(r"(\d+) generated, \1 passed", run.stdout), run.stdout[-3000:]
    # The case count, shown by `pytest -rP` (closing notes quote it).
    print(tmp_path.name, re.findall(r"Test cases:\s*\n\s*(.+)", run.stdout))
