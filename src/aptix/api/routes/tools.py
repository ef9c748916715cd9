"""``/v1/tools``: list tools and invoke one outside a model turn."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse

from aptix.api.answer_headers import ETAG, with_headers
from aptix.api.conditional import (
    apply_if_match,
    cannot_match,
    current_revision,
    etag_headers,
    if_match_field,
    is_conditional,
)
from aptix.api.errors import ApiError
from aptix.api.json_body import JsonBodyRoute
from aptix.api.responses import ToolInfo
from aptix.api.routes.deps import CallerDep, RuntimeDep
from aptix.api.schemas import ErrorBody, InvokeRequest, InvokeResponse
from aptix.api.storable_json import StorableJSONResponse
from aptix.db.outage import DATABASE_UNAVAILABLE, DatabaseRefused, DatabaseUnavailable, refusal_in
from aptix.results import json_value
from aptix.tools.bulkhead import http_refusal

router = APIRouter(prefix="/v1/tools", tags=["tools"], route_class=JsonBodyRoute)


@router.get("", response_model=list[ToolInfo])
async def list_tools(runtime: RuntimeDep, _: CallerDep) -> list[dict[str, Any]]:
    """Every registered tool with its schema and usage guidance."""
    registry = runtime.registry
    rows = []
    for schema in registry.schemas():
        tool_cls = registry.get_tool_type(schema["name"])
        assert tool_cls is not None
        rows.append(
            {
                "name": schema["name"],
                "serverFinal": registry.server_final(schema["name"]),
                "usage": tool_cls.TOOL_USAGE_METADATA,
                "annotations": tool_cls.TOOL_ANNOTATIONS,
                "schema": schema,
            }
        )
    return rows


@router.post(
    "/{name}/invoke",
    response_model=InvokeResponse,
    responses={
        200: with_headers({"description": "The tool's result."}, ETAG),
        409: with_headers(
            {
                "model": ErrorBody,
                "description": "The request conflicts with the current state; for a tool with "
                "revisions, a change another request beat (without `If-Match`), with the "
                "current revision's `ETag`.",
            },
            ETAG,
        ),
        412: with_headers(
            {
                "model": ErrorBody,
                "description": "`If-Match` does not match the current revision, or cannot "
                "match; the current revision's `ETag` comes with it.",
            },
            ETAG,
        ),
    },
)
async def invoke_tool(
    name: str,
    body: InvokeRequest,
    runtime: RuntimeDep,
    caller: CallerDep,
    request: Request,
    # Declared for the document; the route reads every line of the field from the request.
    if_match: Annotated[
        str | None,
        Header(description='The revision a change is based on, as its ETag (`"7"`), or `*`.'),
    ] = None,
) -> JSONResponse:
    """Run one tool as the caller; a tool's own failure is a 200 with ``successful: false``.

    A call that ran out of time is 504 ``timeout``; one refused because the org's sync tool
    threads are all held by earlier timed-out calls is 503 ``overloaded`` with ``Retry-After``.
    A tool with revisions (workflow authoring) answers with an ``ETag`` and honours
    ``If-Match``: a change based on another revision is 412 (409 without ``If-Match``).
    """
    if not runtime.registry.has_tool(name):
        raise ApiError(404, f"Unknown tool '{name}'.")
    sent = body.arguments
    arguments = sent if isinstance(sent, str) else json.dumps(sent or {})
    conditional = is_conditional(runtime.registry, name)
    # ``if_match`` is the first line only: a stale tag on a second line must fail too.
    if_match = if_match_field(request.headers.getlist("if-match"))
    current = None
    if conditional and cannot_match(if_match):
        # Its 412 names the revision to send, as a stale tag's does (the caller's org only).
        tool = runtime.registry.get_tool(name)
        current = await current_revision(tool, arguments, caller.org)
    arguments = apply_if_match(name, conditional, arguments, if_match, current=current)
    # The session's mode and active workflow apply here exactly as in a model turn.
    context = await runtime.session_context(
        org=caller.org, user=caller.user, role=caller.role, session_id=body.session_id
    )
    outcome = await runtime.executor.invoke(name, arguments, context)
    if outcome.error_message == DATABASE_UNAVAILABLE:
        raise DatabaseUnavailable(DATABASE_UNAVAILABLE)  # 503, logged once per outage
    if (reason := refusal_in(outcome.error_message)) is not None:
        raise DatabaseRefused(reason)  # 503, logged once per reason
    if outcome.error_message and (refusal := http_refusal(outcome)):
        # Not the tool's own answer: it ran out of time, or was never started.
        status, code, headers = refusal
        raise ApiError(status, outcome.error_message, code, headers=headers)
    wire = outcome.to_wire()
    wire["result"] = json_value(outcome.result)
    etag = etag_headers(wire["result"], if_match=if_match is not None) if conditional else None
    # Already the documented shape: skip FastAPI's second validation pass on the hot path.
    return StorableJSONResponse(wire, headers=etag)
