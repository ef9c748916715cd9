"""The response headers clients rely on, as the OpenAPI document declares them where sent.

Each constant is the ``headers`` object of an OpenAPI response; merge those an answer sends.
A header declared here is not required: each says when it comes.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ETAG", "RATE_LIMIT", "RETRY_AFTER", "SESSION", "TURN", "with_headers"]

Headers = dict[str, dict[str, Any]]

#: Seconds to wait before sending the request again (never an HTTP date).
RETRY_AFTER: Headers = {
    "Retry-After": {
        "description": "Seconds to wait before sending the request again; absent when waiting "
        "would not help (`database_refused`: the database refuses the server's statements).",
        "schema": {"type": "string", "pattern": "^[0-9]+$"},
    }
}

#: The IETF ``RateLimit`` headers a limit's 429 carries.
RATE_LIMIT: Headers = {
    "RateLimit": {
        "description": "The limit that refused the request and when it renews (IETF "
        '`RateLimit`: `"requests";r=0;t=12`).',
        "schema": {"type": "string"},
    },
    "RateLimit-Policy": {
        "description": 'The limit\'s policy (IETF `RateLimit-Policy`: `"requests";q=60;w=60`, '
        '`"turns";q=4;qu="concurrent-requests"`, `"tokens";q=2000000;w=86400`).',
        "schema": {"type": "string"},
    },
}

#: The workflow's revision an authoring answer is at, for ``If-Match``.
ETAG: Headers = {
    "ETag": {
        "description": 'The workflow\'s newest stored revision (`"7"`): send it back as '
        "`If-Match`. Only from a tool with revisions (workflow authoring), and not for a "
        "read-only, deployment-wide workflow.",
        "schema": {"type": "string", "pattern": '^"[0-9]+"$'},
    }
}

#: The session a ``/v1/chat/completions`` request ran in.
SESSION: Headers = {
    "X-Aptix-Session": {
        "description": "The session the conversation runs in: send it back to continue it. "
        "On every answer once the session is known (not on a refusal before it is picked).",
        "schema": {"type": "string"},
    }
}

#: The turn a streamed ``/v1/agent/execute`` answer runs, known before its first event.
TURN: Headers = {
    "X-Aptix-Turn": {
        "description": "The id of the turn the streamed (`text/event-stream`) answer runs or "
        "resumes, sent with the headers, before any event: a client whose stream is cut short "
        "reads that turn back by id (`GET /v1/sessions/{id}`), where the turns added by other "
        "clients meanwhile could be mistaken for it. Not on a JSON answer (its body has "
        "`turnId`).",
        "schema": {"type": "string"},
    }
}


def with_headers(response: dict[str, Any], *headers: Headers) -> dict[str, Any]:
    """``response`` (an OpenAPI response, or a route's ``responses`` entry) with ``headers``."""
    merged: Headers = dict(response.get("headers", {}))
    for group in headers:
        merged.update(group)
    return {**response, "headers": merged} if merged else dict(response)
