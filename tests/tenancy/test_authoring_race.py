"""Done-when of issue 25: two ``aptix serve`` on one PostgreSQL author one workflow at once.

Six rounds, each on a new workflow id: 8 concurrent drafts, 8 concurrent updates of eight
different fields (half under ``If-Match``), 8 concurrent publishes, spread over both
processes. Exactly one draft is created per id, each version is published once, and every
acknowledged update is in the final workflow or was refused with 409/412. None is lost.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.live import served_many
from tests.databases import create_pg_database, drop_pg_database
from tests.tenancy.test_keys_and_roles import AUTHORING, FIELDS
from tests.workflows.test_revisions import RACED_FIELDS, value_for

ROUNDS = 6
CONCURRENT = 8


@pytest.fixture
def pg_url() -> Iterator[str]:
    url = create_pg_database()
    yield url
    drop_pg_database(url)


async def _call(
    client: httpx.AsyncClient, base: str, if_match: str | None = None, **arguments: Any
) -> tuple[int, dict[str, Any]]:
    headers = {"If-Match": if_match} if if_match is not None else {}
    answer = await client.post(f"{base}{AUTHORING}", json={"arguments": arguments}, headers=headers)
    body: dict[str, Any] = answer.json()
    return answer.status_code, body.get("result") or body


async def _round(
    client: httpx.AsyncClient, bases: list[str], round_no: int, tally: Counter[str]
) -> None:
    wid = f"race_{round_no}"

    def on(i: int) -> str:
        return bases[i % len(bases)]

    drafts = await asyncio.gather(
        *(
            _call(
                client,
                on(i),
                operation="draft_workflow",
                workflowId=wid,
                title="T",
                description="D.",
            )
            for i in range(CONCURRENT)
        )
    )
    created = [r for s, r in drafts if s == 200 and r["ok"]]
    assert len(created) == 1, drafts
    for status, result in drafts:
        if not (status == 200 and result["ok"]):
            assert status == 409 or "already exists" in str(result), (status, result)
    tally["drafts created"] += len(created)
    tally["drafts refused"] += CONCURRENT - len(created)

    status, base = await _call(
        client, on(0), operation="update_workflow", workflowId=wid, fields=FIELDS
    )
    assert status == 200, base
    assert base["ok"], base
    tag = f'"{base["revision"]}"'
    updates = await asyncio.gather(
        *(
            _call(
                client,
                on(i),
                tag if i % 2 else None,
                operation="update_workflow",
                workflowId=wid,
                fields={field: value_for(field, round_no, i)},
            )
            for i, field in enumerate(RACED_FIELDS)
        )
    )
    status, final = await _call(client, on(1), operation="get_workflow", workflowId=wid)
    assert status == 200, final
    for i, (field, (status, result)) in enumerate(zip(RACED_FIELDS, updates, strict=True)):
        if status == 200:
            assert result["ok"], result
            assert final["workflow"][field] == value_for(field, round_no, i), (field, final)
            tally["updates acknowledged"] += 1
        else:
            assert status == (412 if i % 2 else 409), (status, result)
            assert "nothing was changed" in result["error"]["message"]
            tally[f"updates refused {status}"] += 1

    publishes = await asyncio.gather(
        *(
            _call(client, on(i), operation="publish_workflow", workflowId=wid)
            for i in range(CONCURRENT)
        )
    )
    published = [r for s, r in publishes if s == 200 and r["ok"]]
    assert len(published) == 1, publishes
    for status, result in publishes:
        if not (status == 200 and result["ok"]):
            assert status == 409 or "no draft to publish" in str(result), (status, result)
    tally["publishes refused"] += CONCURRENT - 1

    status, history = await _call(client, on(0), operation="workflow_history", workflowId=wid)
    actions = Counter((h["action"], h["version"]) for h in history["history"])
    assert actions[("draft", "0.1.0")] == 1, history
    assert actions[("publish", "0.1.0")] == 1, history


def test_two_served_processes_on_postgresql_lose_no_authoring_change(
    tmp_path: Path, pg_url: str
) -> None:
    env = {"APTIX_DATABASE_URL": pg_url, "APTIX_SEMANTIC_MATCHING": "false"}
    dirs = [tmp_path / "a", tmp_path / "b"]
    for folder in dirs:
        folder.mkdir()
    with served_many(dirs, **env) as running:
        bases = [r.url for r in running]
        tally: Counter[str] = Counter()

        async def race() -> None:
            async with httpx.AsyncClient(timeout=30) as client:
                for round_no in range(ROUNDS):
                    await _round(client, bases, round_no, tally)

        started = time.perf_counter()
        asyncio.run(race())
        seconds = time.perf_counter() - started
    assert tally["drafts created"] == ROUNDS
    print(f"\n{ROUNDS} rounds in {seconds:.2f} s: {dict(sorted(tally.items()))}")
