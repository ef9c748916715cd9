"""``/v1/workflows`` answers bad input with 422 and keeps 409 for the workflow's state."""

from __future__ import annotations

import httpx
import pytest

from aptix.runtime import Runtime
from aptix.tools.builtin.workflow_registry import MAX_MESSAGE_LENGTH
from tests.workflows.conftest import make_manifest


def _error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    return str(body["error"]["message"])


async def test_a_match_message_over_the_tools_limit_is_invalid_not_a_conflict(
    client: httpx.AsyncClient,
) -> None:
    """Regression: 4,001 to 10,000 characters passed the schema and answered 409."""
    for length in (MAX_MESSAGE_LENGTH + 1, 4_800, 9_900):  # the body limit here is 10,000 bytes
        message = ("plan an offsite " * 700)[:length]
        answer = await client.post("/v1/workflows/match", json={"userMessage": message})
        assert "at most 4000 characters" in _error(answer, 422, "invalid_request")
    longest = ("plan an offsite " * 300)[:MAX_MESSAGE_LENGTH]
    assert (await client.post("/v1/workflows/match", json={"userMessage": longest})).is_success


async def test_the_match_schema_states_the_tools_limit(client: httpx.AsyncClient) -> None:
    schemas = (await client.get("/openapi.json")).json()["components"]["schemas"]
    limits = {
        key: schema["maxLength"]
        for variant in schemas["MatchRequest"]["anyOf"]
        for key, schema in variant["properties"].items()
    }
    assert limits == {"userMessage": MAX_MESSAGE_LENGTH, "UserMessage": MAX_MESSAGE_LENGTH}


async def test_a_blank_workflow_id_is_not_found_not_a_conflict(client: httpx.AsyncClient) -> None:
    # 404, not 422: the path is schema-valid text, and no workflow has that id.
    for blank, shown in (("%20", "' '"), ("%09", "'\\t'"), ("%20%20%20", "'   '")):
        message = _error(await client.get(f"/v1/workflows/{blank}"), 404, "not_found")
        assert message == f"Unknown workflow {shown}."


async def test_a_disabled_workflow_is_still_a_conflict(
    client: httpx.AsyncClient, keyed_runtime: Runtime
) -> None:
    keyed_runtime.workflows.registry.publish(
        make_manifest("old_export", status="disabled"), org="acme"
    )
    answer = await client.get("/v1/workflows/old_export")
    assert _error(answer, 409, "conflict") == (
        "Workflow 'old_export' is disabled and cannot be run."
    )
    assert _error(await client.get("/v1/workflows/nope"), 404, "not_found") == (
        "Unknown workflow 'nope'."
    )


async def test_a_registry_failure_is_an_internal_error_not_a_conflict(
    client: httpx.AsyncClient, keyed_runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("index lost")

    monkeypatch.setattr(keyed_runtime.workflows.registry, "listed", broken)
    message = _error(await client.get("/v1/workflows"), 500, "internal_error")
    assert message == "The workflow registry failed unexpectedly. The error has been logged."
    assert "index lost" not in message
