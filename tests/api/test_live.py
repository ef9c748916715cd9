"""End to end: ``aptix serve`` in a subprocess, then schemathesis against its OpenAPI."""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

from aptix.testing.server import ScriptedOpenAIServer
from tests.api.live import serve


@pytest.fixture(scope="module")
def live_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # The scripted model has no answers: every turn ends as kind "error" (a 200), so that
    # schemathesis exercises the execute route without a real model.
    with (
        ScriptedOpenAIServer() as model,
        serve(
            tmp_path_factory.mktemp("live"),
            APTIX_LLM_BASE_URL=model.base_url,
            APTIX_LLM_MODEL="scripted",
            APTIX_LLM_MAX_RETRIES="0",
            APTIX_SEMANTIC_MATCHING="false",
        ) as url,
    ):
        yield url


def test_served_process_answers_health_tools_and_sessions(live_url: str) -> None:
    assert httpx.get(f"{live_url}/healthz").json()["status"] == "ok"
    invoked = httpx.post(
        f"{live_url}/v1/tools/agent_list_modes/invoke", json={"arguments": {}}
    ).json()
    assert invoked["successful"] is True
    assert invoked["result"]["modes"][0]["key"] == "general"
    session = httpx.post(f"{live_url}/v1/sessions", json={}).json()["sessionId"]
    change = {"mode": "calculation", "branch": False, "reason": "numbers"}
    changed = httpx.post(
        f"{live_url}/v1/tools/agent_change_mode/invoke",
        json={"arguments": change, "sessionId": session},
    ).json()
    assert changed["result"]["mode"] == "calculation"
    bad = httpx.post(
        f"{live_url}/v1/sessions", content=b"{", headers={"content-type": "application/json"}
    )
    assert bad.status_code == 422
    assert bad.json()["error"]["code"] == "invalid_request"


EXAMPLES_PER_OPERATION = 25 if os.environ.get("APTIX_CI") else 5


def test_no_route_answers_5xx_and_responses_match_the_schema(live_url: str) -> None:
    schema = schemathesis.openapi.from_url(f"{live_url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 13
    tried = 0
    for operation in operations:

        @given(operation.as_strategy())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        def check(case: schemathesis.Case) -> None:
            nonlocal tried
            tried += 1
            case.call_and_validate(checks=[not_a_server_error, response_schema_conformance])

        check()
    assert tried >= len(operations)
