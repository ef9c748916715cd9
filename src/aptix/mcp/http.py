"""MCP over streamable HTTP at ``/mcp`` on the API's app, behind the same bearer keys.

Authentication is the ``mcp`` SDK's own: Starlette's ``AuthenticationMiddleware`` with the
SDK's ``BearerAuthBackend`` on the API's :class:`~aptix.api.auth.ApiKeyVerifier`, and the
SDK's ``AuthContextMiddleware`` so that the tool handler reads the caller with
``get_access_token()``. Only the refusal is ours: the API's error envelope and challenge.

The server is stateless, so a client's ``notifications/cancelled`` arrives on a request of its
own and the SDK never ties a closed connection to the call it carried: both are tied here
(:class:`~aptix.mcp.server.CallsInFlight`), and cancelling the call forwards the cancel to an
MCP server behind it. A request id names a call only within one client's session: the answer
to ``initialize`` carries a fresh ``Mcp-Session-Id`` (kept nowhere), and a cancel reaches only
a call sent with the same one, by the same key. A cancel without one is acknowledged and
dropped, as the SDK drops every cancel posted under the 2026-07-28 protocol: nothing tells
whose call its id names, and ids collide (every client counts from 1). Such a client cancels
by closing the connection.

A cancel that comes before its call got that far (the two travel on connections of their
own) is kept a short while and stops the call before it runs; what is kept stays small (an
id that is a string or an integer, and it and the session id of at most
:data:`~aptix.mcp.server.EARLY_CANCEL_ID_CHARS` characters). A call the client cancelled is
not answered (MCP), as over stdio: its POST gets 202 and no body, as a batch with nothing left
to answer does. (The SDK's own transport would answer it -32800 on this wire.)
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager

import anyio
from mcp import types
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, check_accept_headers
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aptix.api.auth import BEARER_CHALLENGE, LOCAL_CALLER, ApiKeyVerifier, caller_from_token
from aptix.api.errors import error_body
from aptix.mcp.messages import (
    BATCH_VERSION,
    batch,
    batch_part,
    batch_refused,
    error,
)
from aptix.mcp.messages import refusal as _refusal
from aptix.mcp.server import (
    CANCELLED_SCOPE_KEY,
    EARLY_CANCEL_ID_CHARS,
    EXCHANGE_SCOPE_KEY,
    SESSION_SCOPE_KEY,
    CallsInFlight,
    build_mcp_server,
    request_key,
)
from aptix.runtime import Runtime
from aptix.telemetry import ORG_ATTRIBUTE, Tracing

__all__ = ["mcp_http_app"]

logger = logging.getLogger(__name__)


@asynccontextmanager
async def mcp_http_app(runtime: Runtime, verifier: ApiKeyVerifier) -> AsyncIterator[ASGIApp]:
    """The ``/mcp`` ASGI app for the lifetime of the block (its session manager runs inside)."""
    in_flight = CallsInFlight()
    server = build_mcp_server(runtime, in_flight=in_flight)
    inner = server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
        # The app's own guard (aptix.api.edge.LoopbackOnly) checks Host and Origin for every
        # path when there are no keys; with keys the SDK's loopback-only list would refuse
        # every real host name.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    app: ASGIApp = _OneMessage(inner, in_flight, runtime.tracing)
    if verifier.enabled:
        app = AuthenticationMiddleware(
            _RequireKey(AuthContextMiddleware(app)), backend=BearerAuthBackend(verifier)
        )

    async with server.session_manager.run():
        yield _Endpoint(app)


class _RequireKey:
    """Refuses a request the bearer backend did not authenticate (401, envelope, challenge)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not isinstance(scope.get("user"), AuthenticatedUser):
            challenge = [(b"www-authenticate", BEARER_CHALLENGE.encode())]
            await _send_json(
                send, 401, error_body("unauthorized", "Send a valid API key."), challenge
            )
            return
        await self._app(scope, receive, send)


async def _send_json(
    send: Send, status: int, answer: object, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(answer).encode()
    start = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *(headers or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": body})


_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)


def _header_refusal(scope: Scope) -> tuple[int, dict[str, object]] | None:
    """The status and envelope refusing a POST for its headers, before the SDK reads it.

    The SDK answers these with a JSON-RPC error (or a bare status), and one for an unknown
    ``MCP-Protocol-Version`` with words about ``params._meta``. (Its refusals in plain text
    or none are put in the envelope by :class:`aptix.api.errors.EnvelopeErrors`.)
    """
    has_json, _ = check_accept_headers(Request(scope))
    if not has_json:
        message = "Not Acceptable: /mcp answers in JSON; send 'Accept: application/json'."
        return 406, error_body("not_acceptable", message)
    version = Headers(scope=scope).get("mcp-protocol-version")
    if version is not None and version not in _VERSIONS:
        shown = version if len(version) <= 40 else version[:40] + "…"
        message = (
            f"Unsupported MCP-Protocol-Version header {json.dumps(shown)}; supported: "
            f"{', '.join(_VERSIONS)}."
        )
        return 400, error_body("bad_request", message)
    return None


class _Endpoint:
    """Wraps the ASGI callable so that a Starlette ``Route`` passes requests through raw."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)


class _OneMessage:
    """Answers a body that is not a JSON-RPC 2.0 message, as stdio does (-32700 or -32600).

    The SDK answered a readable one with its validation dump (-32602), and one whose ``id``
    is an object with 202 and no answer at all. Inside the key check: a caller without a
    key gets 401 before its body is read. It also ties a client's cancel and a closed
    connection to the calls they concern (``in_flight``), and answers a batch under
    protocol 2025-03-26, which the SDK cannot read (:meth:`_answer_batch`). Past the key
    check, it puts the caller's org on the request's span (``aptix.org.id``).
    """

    def __init__(self, app: ASGIApp, in_flight: CallsInFlight, tracing: Tracing) -> None:
        self._app = app
        self._in_flight = in_flight
        self._tracing = tracing
        #: The requests of batches still running, by the key a cancel names them with.
        self._members: dict[Hashable, set[_Member]] = {}
        #: Whether a cancel not kept for its id's size or type was logged (it is, once).
        self._told_not_kept = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            # The org on the request's span, as the API's routes put it there (its name; the
            # key stays out of every trace): the caller is known here, past the key check.
            self._tracing.annotate({ORG_ATTRIBUTE: _who(scope)[0]})
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self._app(scope, receive, send)
            return
        if (refused := _header_refusal(scope)) is not None:
            await _send_json(send, *refused)
            return
        chunks: list[bytes] = []
        while True:  # the app's body limit has already capped what arrives
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        parts = batch(body)
        if parts is None and (refusal := _refusal(body)) is not None:
            await _send_json(send, 400, refusal)
            return
        # Without the header, the spec (2025-06-18, transports) says to assume 2025-03-26.
        version = Headers(scope=scope).get("mcp-protocol-version", BATCH_VERSION)
        if parts is not None and version != BATCH_VERSION:
            refusal = error(types.INVALID_REQUEST, batch_refused(version))
            await _send_json(send, 400, refusal)
            return
        exchange = scope[EXCHANGE_SCOPE_KEY] = object()
        gone = anyio.Event()

        async def watch() -> None:
            # Past the body, the server's next message is the disconnect: the client went
            # away (or the answer is complete, when nothing is running any more).
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()
            # The calls running, and those still on their way to their tool, never run on.
            self._in_flight.end(exchange)

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(watch)
                if parts is None:
                    await self._answer_alone(scope, body, send, gone)
                else:
                    await self._answer_batch(scope, parts, send, gone)
                group.cancel_scope.cancel()
        finally:
            self._in_flight.release(exchange)

    async def _answer_alone(self, scope: Scope, body: bytes, send: Send, gone: anyio.Event) -> None:
        """Answer one message posted alone; a call the client cancelled gets 202 and no body.

        MCP: a cancelled request is not answered (stdio and batches leave it out); the POST
        still needs an end, and it gets the one a batch with nothing left to answer gets.
        """
        parsed = json.loads(body)
        if not (isinstance(parsed, dict) and parsed.get("method") == "tools/call"):
            await self._answer(scope, body, parsed, send, gone)
            return
        held = _HeldAnswer()
        if await self._answer(scope, body, parsed, held, gone):
            await _send_empty(send)
        else:
            await held.send_to(send)

    async def _answer(
        self, scope: Scope, body: bytes, parsed: object, send: Send, gone: anyio.Event
    ) -> bool:
        """Pass one readable message (``body``, read as ``parsed``) to the SDK.

        ``gone`` is set when the client goes away. True when it was a call the client
        cancelled: the answer it was given is to be dropped.
        """
        session = Headers(scope=scope).get(MCP_SESSION_ID_HEADER)
        if session is not None:
            scope[SESSION_SCOPE_KEY] = session
            self._forward_cancel(scope, session, parsed)
        if isinstance(parsed, dict) and parsed.get("method") == "initialize":
            send = _issuing_session(send, secrets.token_hex(16))
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                await gone.wait()
                return {"type": "http.disconnect"}
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self._app(scope, replay, send)
        return scope.get(CANCELLED_SCOPE_KEY) is True

    async def _answer_batch(
        self, scope: Scope, parts: list[object], send: Send, gone: anyio.Event
    ) -> None:
        """Answer each message of a batch as if posted alone, together, in the batch's order.

        Each goes through every check a message posted alone does, and they run side by side
        (at most :data:`_BATCH_WIDTH` at once), as JSON-RPC 2.0 allows. Notifications and
        cancelled calls have no answer; a batch of nothing else is answered 202.
        """
        answers: list[object] = [None] * len(parts)
        width = anyio.CapacityLimiter(_BATCH_WIDTH)

        async def one(index: int, part: object) -> None:
            text, found = batch_part(part)
            if found is not None:
                answers[index] = error(*found)
                return
            kept = _KeptAnswer()
            member, key = _Member(), self._member_key(scope, part)
            if key is not None:
                self._members.setdefault(key, set()).add(member)
            try:
                async with width:
                    # Cancelled while waiting its turn, or its client gone: never run. Its own
                    # scope, which the SDK and the cancel keys write into; a cancel that came
                    # before the batch itself, or after it began, is found as the call starts.
                    if not member.cancelled and not gone.is_set():
                        member.begun = True
                        member.cancelled = await self._answer(
                            dict(scope), text.encode(), part, kept, gone
                        )
            finally:
                if key is not None:
                    members = self._members.get(key, set())
                    members.discard(member)
                    if not members:
                        self._members.pop(key, None)
            # A call the client cancelled is left out, as over stdio (the SDK's dispatcher
            # answers none there); its client stopped waiting for it.
            answers[index] = None if member.cancelled else kept.answer()

        async with anyio.create_task_group() as group:
            for index, part in enumerate(parts):
                group.start_soon(one, index, part)
        found = [answer for answer in answers if answer is not None]
        if found:
            await _send_json(send, 200, found)
        else:
            await _send_empty(send)

    def _forward_cancel(self, scope: Scope, session: str, message: object) -> None:
        """A client's ``notifications/cancelled`` cancels its own call in ``session``."""
        if not isinstance(message, dict) or message.get("method") != "notifications/cancelled":
            return
        params = message.get("params")
        if not isinstance(params, dict) or "requestId" not in params:
            return
        request_id = params["requestId"]
        if not _is_request_id(request_id):
            # No request has it (one posted with it was refused): nothing to stop or keep.
            self._not_kept("its requestId is not a string or an integer")
            return
        key = request_key(_who(scope), session, request_id)
        members = self._members.get(key, set())
        for member in members:
            if not member.begun:
                member.cancelled = True  # still waiting its turn: it never begins
        # One that stops no running call is kept for the call to come: the call, posted first,
        # may not have been read yet, or may still be on its way to the tool (quota, sync),
        # as a batch's own call is when the cancel follows it in the batch. Only one that
        # stopped every request it names while they waited their turn has nothing to keep.
        keep = not members or any(member.begun for member in members)
        if keep and max(len(str(request_id)), len(session)) > EARLY_CANCEL_ID_CHARS:
            # What is kept is the client's text: a long one still stops a call running.
            self._not_kept(
                f"its requestId or Mcp-Session-Id is over {EARLY_CANCEL_ID_CHARS} characters"
            )
            keep = False
        self._in_flight.cancel(key, keep=keep)

    def _not_kept(self, why: str) -> None:
        """Log, the first time only, that a client's cancel is not kept for its call to come."""
        if not self._told_not_kept:
            self._told_not_kept = True
            logger.warning(
                "a notifications/cancelled was not kept for the call it names: %s (MCP ids are "
                "strings or integers, and a kept cancel's requestId and Mcp-Session-Id are at "
                "most %d characters); such cancels are not kept, and this is logged once.",
                why,
                EARLY_CANCEL_ID_CHARS,
            )

    def _member_key(self, scope: Scope, part: object) -> Hashable | None:
        """The key a cancel names the batch request ``part`` with; None when none can."""
        session = Headers(scope=scope).get(MCP_SESSION_ID_HEADER)
        if session is None or not isinstance(part, dict) or "method" not in part:
            return None
        request_id = part.get("id")  # none for a notification: no cancel names it
        return request_key(_who(scope), session, request_id) if _is_request_id(request_id) else None


def _is_request_id(value: object) -> bool:
    """Whether ``value`` can be a request's id: MCP's ids are strings and integers only."""
    return isinstance(value, str | int) and not isinstance(value, bool)


def _who(scope: Scope) -> tuple[str, str, str]:
    """The caller of a request, as :func:`~aptix.mcp.server.request_key` names it."""
    user = scope.get("user")
    token = user.access_token if isinstance(user, AuthenticatedUser) else None
    caller = caller_from_token(token) or LOCAL_CALLER
    return (caller.org, caller.user, caller.key_id)


class _Member:
    """One request of a batch: whether it began, and whether the client cancelled it.

    A cancel stops one that has not begun; one that began is stopped where a call posted
    alone is (:class:`~aptix.mcp.server.CallsInFlight`), and is left out of the answer only
    when it was: a call that ran to its end despite the cancel is answered.
    """

    def __init__(self) -> None:
        self.begun = False
        self.cancelled = False


#: How many messages of one batch run at once: one POST never starts every call of a long batch.
_BATCH_WIDTH = 8


async def _send_empty(send: Send) -> None:
    """202 and no body: accepted, with no JSON-RPC answer to give."""
    empty = [(b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 202, "headers": empty})
    await send({"type": "http.response.body", "body": b""})


class _HeldAnswer:
    """An ASGI ``send`` that holds an answer until it is known whether it is to be sent."""

    def __init__(self) -> None:
        self._messages: list[Message] = []

    async def __call__(self, message: Message) -> None:
        """Hold the message."""
        self._messages.append(message)

    async def send_to(self, send: Send) -> None:
        """Send what was held, as it was given."""
        for message in self._messages:
            await send(message)


class _KeptAnswer:
    """An ASGI ``send`` that keeps the JSON-RPC answer to one message of a batch."""

    def __init__(self) -> None:
        self._body: list[bytes] = []

    async def __call__(self, message: Message) -> None:
        """Keep the body; the status and headers belong to the batch's one answer."""
        if message["type"] == "http.response.body":
            self._body.append(message.get("body", b""))

    def answer(self) -> object:
        """The answer kept, or None for a message that has none (a notification, say)."""
        try:
            answer = json.loads(b"".join(self._body))
        except ValueError:
            return None
        return answer if isinstance(answer, dict) else None


def _issuing_session(send: Send, session: str) -> Send:
    """``send``, adding ``Mcp-Session-Id: session`` to a successful answer (to ``initialize``).

    Nothing is kept of it: it only lets the client's later cancels name their own calls.
    """

    async def issuing(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] == 200:
            headers = [
                *message.get("headers", []),
                (MCP_SESSION_ID_HEADER.encode(), session.encode()),
            ]
            message = {**message, "headers": headers}
        await send(message)

    return issuing
