"""``/v1/modes`` and ``/v1/workflows``: the catalogs the model works with."""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import APIRouter

from aptix.api.auth import Caller
from aptix.api.errors import ApiError
from aptix.api.json_body import JsonBodyRoute
from aptix.api.responses import Mode
from aptix.api.routes.deps import CallerDep, RuntimeDep
from aptix.api.schemas import MatchRequest
from aptix.runtime import Runtime
from aptix.tools.builtin.workflow_registry import WorkflowRegistryTool
from aptix.tools.bulkhead import http_refusal

router = APIRouter(tags=["catalogs"], route_class=JsonBodyRoute)

#: How the registry tool refuses its arguments (blank, too long, malformed): bad input.
_BAD_ARGUMENTS = re.compile(
    r"Operation '\w+' requires a non-empty |'\w+' is too long \(|Invalid arguments: "
    r"|Arguments must be "
)


@router.get("/v1/modes", response_model=list[Mode])
async def list_modes(runtime: RuntimeDep, _: CallerDep) -> list[dict[str, Any]]:
    """Every mode with the tools it offers."""
    catalog = runtime.services.modes
    return [
        {
            **mode.model_dump(mode="json", by_alias=True),
            "offeredTools": catalog.tools_for_mode(mode.key),
        }
        for mode in await catalog.get_all_modes()
    ]


async def _registry(runtime: Runtime, caller: Caller, arguments: dict[str, Any]) -> Any:
    # The HTTP routes go through the registry tool so that its guardrails apply unchanged.
    context = runtime.tool_context(org=caller.org, user=caller.user, role=caller.role)
    outcome = await runtime.executor.invoke(
        "agent_workflow_registry", json.dumps(arguments), context
    )
    if outcome.result is None:
        message = outcome.error_message or "The workflow registry failed."
        if (refusal := http_refusal(outcome)) is not None:
            status, code, headers = refusal
            raise ApiError(status, message, code, headers=headers)
        status, code = _status(message)
        raise ApiError(status, message, code)
    return json.loads(outcome.result)


def _status(message: str) -> tuple[int, str]:
    """The status and code of a registry refusal; 409 only for the workflow's state."""
    if message.startswith("Unknown workflow"):
        return 404, "not_found"
    if _BAD_ARGUMENTS.match(message):
        return 422, "invalid_request"
    if message == WorkflowRegistryTool.FAILURE:
        return 500, "internal_error"
    return 409, "conflict"  # disabled, a draft, or no longer valid


@router.get("/v1/workflows")
async def list_workflows(runtime: RuntimeDep, caller: CallerDep) -> Any:
    """Public and experimental runnable workflows."""
    return await _registry(runtime, caller, {"operation": "list_workflows"})


@router.get("/v1/workflows/{workflow_id}")
async def get_workflow(workflow_id: str, runtime: RuntimeDep, caller: CallerDep) -> Any:
    """One workflow's manifest (hidden ones by explicit id only)."""
    if not workflow_id.strip():
        # No workflow has a blank id: the resource is missing (the schema allows any text).
        raise ApiError(404, f"Unknown workflow {workflow_id!r}.", "not_found")
    return await _registry(
        runtime, caller, {"operation": "get_workflow_manifest", "workflowId": workflow_id}
    )


@router.post("/v1/workflows/match")
async def match_workflows(body: MatchRequest, runtime: RuntimeDep, caller: CallerDep) -> Any:
    """Workflows ranked by how well they fit the message."""
    return await _registry(
        runtime, caller, {"operation": "match_workflow", "userMessage": body.user_message}
    )
