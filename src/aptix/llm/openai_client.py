"""``OpenAiLlmClient``: any OpenAI-compatible endpoint through the official ``openai`` package."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal
from urllib.parse import urlsplit

import openai
from openai import AsyncOpenAI

from aptix.errors import LlmError
from aptix.llm.heard import heard
from aptix.llm.types import (
    RESPONSES_FINISH,
    LlmRequest,
    LlmResponse,
    Message,
    TextSink,
    ToolCallRequest,
    Usage,
)
from aptix.nul import storable, storable_json
from aptix.urls import MASK, mask_credentials

__all__ = ["OpenAiLlmClient", "sendable", "to_chat_tool", "to_responses_input", "to_text_format"]

Api = Literal["chat", "responses"]

_log = logging.getLogger("aptix.llm")


class OpenAiLlmClient:
    """Chat Completions by default, the Responses API when ``api="responses"``.

    The ``openai`` package retries 408/409/429/5xx and connection errors with exponential
    backoff (``max_retries``); whatever still fails becomes one :class:`LlmError` whose
    message says what to check, without the endpoint's address (logged beside it).

    ``temperature`` and ``max_output_tokens`` go with every request when given (the output
    cap as ``max_completion_tokens`` to OpenAI and Azure, whose newer models refuse
    ``max_tokens``, as ``max_tokens`` to other Chat Completions servers, which may not know
    the newer name, and as ``max_output_tokens`` to the Responses API); ``extra_headers``
    are added to every HTTP request. A request's ``response_format`` goes as Chat
    Completions' ``response_format``, or as the Responses API's ``text.format``.

    A caller that streams (an ``on_text`` sink) gets a streamed call on either API: the text
    is passed on in pieces as the model writes it, and a stream that ends before its answer's
    last event is an :class:`LlmError`. A Responses answer's message items are separated by a
    blank line, and only its ``final_answer`` items are the text when it marks any.

    Whichever API answers, the response's ``finish_reason`` is a Chat Completions word
    (``stop``, ``tool_calls``, ``length``, ``content_filter``): the Responses API's
    ``status`` and ``incomplete_details`` are read as those (see :func:`_responses_finish`),
    and a Responses ``status`` that is no answer (``failed``, ``cancelled``, ...) is an
    :class:`LlmError` with the endpoint's message. Usage counts the endpoint leaves out or
    sends as ``null`` are read as 0, and a tool call without an id gets ``""`` (the reasoner
    names it).
    """

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        model: str,
        api: Api = "chat",
        timeout_seconds: float = 60.0,
        max_retries: int = 2,
        temperature: float | None = None,
        max_output_tokens: int | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        self.model = model
        self.api = api
        self.base_url = base_url or "https://api.openai.com/v1"
        self.temperature = temperature
        self.max_output_tokens = max_output_tokens
        self._timeout = timeout_seconds
        self._where = mask_credentials(base_url or "https://api.openai.com/v1")
        # What an endpoint may quote back in its error (a gateway echoing the key it refused).
        self._secrets = _secrets(api_key, extra_headers)
        self._client = AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or "not-needed",
            timeout=timeout_seconds,
            max_retries=max_retries,
            default_headers=dict(extra_headers or {}),
        )
        self._sampling: dict[str, Any] = {}
        if temperature is not None:
            self._sampling["temperature"] = temperature
        self._chat_sampling = dict(self._sampling)
        if max_output_tokens is not None:
            cap = "max_completion_tokens" if _is_openai(base_url) else "max_tokens"
            self._chat_sampling[cap] = max_output_tokens
            self._sampling["max_output_tokens"] = max_output_tokens

    async def complete(self, request: LlmRequest, on_text: TextSink | None = None) -> LlmResponse:
        """Send the request (streaming when ``on_text`` is given); failures raise LlmError."""
        try:
            return await self._complete(request, on_text)
        except LlmError as exc:
            # The message reaches every caller of a turn, tenants of the HTTP API among them:
            # it says what failed, and only the server log says where the endpoint is.
            _hide_secrets(exc, self._secrets)
            _log.warning("[OpenAiLlmClient_Complete__Failed] %s (endpoint %s)", exc, self._where)
            raise

    async def _complete(self, request: LlmRequest, on_text: TextSink | None) -> LlmResponse:
        if on_text is not None:
            on_text = _nul_free_sink(on_text)
        try:
            if self.api == "responses":
                return _nul_free(await self._responses(request, on_text))
            if on_text is not None:
                return _nul_free(await self._chat_stream(request, on_text))
            return _nul_free(await self._chat(request))
        except openai.AuthenticationError as exc:
            raise LlmError(
                "The model endpoint refused the API key (HTTP 401); check APTIX_LLM_API_KEY.",
                status_code=401,
            ) from exc
        except openai.NotFoundError as exc:
            raise LlmError(
                f"The model endpoint does not know model '{self.model}' or this API "
                "(HTTP 404); check APTIX_LLM_MODEL and APTIX_LLM_BASE_URL.",
                status_code=404,
            ) from exc
        except openai.APITimeoutError as exc:
            raise LlmError(
                f"The model endpoint timed out after {self._timeout:g} s; is it overloaded, "
                "or should APTIX_LLM_TIMEOUT_SECONDS be higher?",
            ) from exc
        except openai.APIConnectionError as exc:
            raise LlmError(
                "Cannot reach the model endpoint; is it running and is APTIX_LLM_BASE_URL right?",
            ) from exc
        except openai.APIStatusError as exc:
            raise LlmError(
                f"The model endpoint answered HTTP {exc.status_code}: {_short(exc.message)}",
                status_code=exc.status_code,
            ) from exc
        except (
            openai.OpenAIError,
            KeyError,
            IndexError,
            TypeError,
            AttributeError,
            ValueError,  # a body or a stream event that is not JSON
        ) as exc:
            if isinstance(exc, TypeError | ValueError):
                # The ``openai`` client encodes the request inside the call: a request JSON
                # cannot carry fails alike, and is Aptix's own fault, not the endpoint's.
                # Looked at only then, so that no call encodes its tools twice.
                _check_sendable(request)
            raise LlmError(f"The model endpoint sent a response Aptix cannot read: {exc}") from exc

    async def close(self) -> None:
        """Close the HTTP connection pool."""
        await self._client.close()

    async def _chat(self, request: LlmRequest) -> LlmResponse:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": sendable(request.messages),
            **self._chat_sampling,
            **_chat_format(request),
        }
        if request.tools:
            kwargs["tools"] = [to_chat_tool(t) for t in request.tools]
        completion = await self._client.chat.completions.create(**kwargs)
        choice = completion.choices[0]
        calls = tuple(
            # A missing or null id is "" as in a stream: the reasoner gives it a fresh one.
            ToolCallRequest(c.id or "", c.function.name or "", c.function.arguments or "")
            for c in (choice.message.tool_calls or ())
            if getattr(c, "function", None) is not None
        )
        usage = completion.usage
        return LlmResponse(
            text=choice.message.content,
            tool_calls=calls,
            usage=_usage(usage, "prompt_tokens", "completion_tokens"),
            finish_reason=choice.finish_reason,
            model_id=completion.model,
            refusal=getattr(choice.message, "refusal", None) or None,
        )

    async def _chat_stream(self, request: LlmRequest, on_text: TextSink) -> LlmResponse:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": sendable(request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
            **self._chat_sampling,
            **_chat_format(request),
        }
        if request.tools:
            kwargs["tools"] = [to_chat_tool(t) for t in request.tools]
        text: list[str] = []
        refusal: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        usage = Usage()
        finish: str | None = None
        model_id: str | None = None
        stream = await self._client.chat.completions.create(**kwargs)
        async for chunk in stream:
            model_id = chunk.model or model_id
            if chunk.usage is not None:
                usage = _usage(chunk.usage, "prompt_tokens", "completion_tokens")
            for choice in chunk.choices:
                finish = choice.finish_reason or finish
                delta = choice.delta
                if delta.content:
                    text.append(delta.content)
                    await on_text(delta.content)
                if getattr(delta, "refusal", None):
                    refusal.append(str(delta.refusal))
                    heard(str(delta.refusal))  # billed as text is: charged if cut short
                for part in delta.tool_calls or ():
                    # Tool calls arrive in pieces keyed by index: id and name first, then
                    # the arguments JSON in fragments.
                    call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                    call["id"] = part.id or call["id"]
                    if part.function is not None:
                        call["name"] = part.function.name or call["name"]
                        call["arguments"] += part.function.arguments or ""
                        heard(part.function.arguments)
        if finish is None:
            # Every Chat Completions stream ends its answer with a finish_reason ("stop",
            # "tool_calls", "length", ...). A stream that closes without one was broken off
            # (the connection dropped, or its last event was cut mid-JSON, which the openai
            # package skips without a word): what arrived is a fragment, not the model's
            # answer, so it fails like the unreadable body it would be without streaming.
            raise LlmError(_cut_off("no finish_reason"))
        return LlmResponse(
            text="".join(text) or None,
            tool_calls=tuple(
                ToolCallRequest(c["id"], c["name"], c["arguments"])
                for _, c in sorted(calls.items())
            ),
            usage=usage,
            finish_reason=finish,
            model_id=model_id,
            refusal="".join(refusal) or None,
        )

    async def _responses(self, request: LlmRequest, on_text: TextSink | None) -> LlmResponse:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "input": to_responses_input(request.messages),
            **self._sampling,
        }
        if (answer_format := to_text_format(request.response_format)) is not None:
            kwargs["text"] = {"format": answer_format}
        if request.tools:
            kwargs["tools"] = [{**t, "strict": False} for t in request.tools]
        # Commentary glued onto an answer in a format would fail its check: only then is the
        # answer the final-answer items alone.
        final_only = answer_format is not None
        if on_text is not None:
            return await self._responses_stream(kwargs, on_text, final_only=final_only)
        response = await self._client.responses.create(**kwargs)
        return _read_response(response, response.output, final_only=final_only)

    async def _responses_stream(
        self, kwargs: dict[str, Any], on_text: TextSink, *, final_only: bool
    ) -> LlmResponse:
        """A streamed Responses call: text pieces passed on as they come, as with chat.

        Every piece is passed on, commentary included: the model sent it (a call cut short
        is charged for what was passed on), and outside a format it is part of the answer.
        """
        final: Any = None
        done: dict[int, Any] = {}  # output items as each one finished
        deltas: dict[int, list[str]] = {}
        sent: list[str] = []
        last: int | None = None
        stream = await self._client.responses.create(**kwargs, stream=True)
        try:
            async for received in stream:
                event: Any = received
                kind = getattr(event, "type", None)
                index = getattr(event, "output_index", 0)
                index = index if isinstance(index, int) else 0
                if kind == "response.output_text.delta" and event.delta:
                    deltas.setdefault(index, []).append(event.delta)
                    pieces = [_ITEMS, event.delta] if sent and index != last else [event.delta]
                    last = index
                    for piece in pieces:
                        sent.append(piece)
                        await on_text(piece)
                elif kind in _HEARD and isinstance(getattr(event, "delta", None), str):
                    heard(event.delta)  # a call's arguments, a refusal: charged if cut short
                elif kind == "response.output_item.done":
                    done[index] = event.item
                elif kind in ("response.completed", "response.incomplete", "response.failed"):
                    final = event.response
                    break
                elif kind == "error":
                    raise _stream_error(event)
        finally:
            await stream.close()
        if final is None:
            # As on Chat Completions: what arrived is a fragment, not the model's answer.
            raise LlmError(_cut_off("no response.completed"))
        # An endpoint may leave the last event's output out: the items as they finished are it.
        output = getattr(final, "output", None) or [done[i] for i in sorted(done)]
        answer = _read_response(final, output, final_only=final_only)
        if answer.text is None and not any(getattr(i, "type", None) == "message" for i in output):
            texts = ("".join(deltas[i]) for i in sorted(deltas))
            answer = replace(answer, text=_ITEMS.join(t for t in texts if t) or None)
        # Text not streamed yet (an endpoint that sends its text only with the last event) is
        # passed on now, so the pieces a caller got add up to the answer.
        said = "".join(sent)
        if answer.text and answer.text != said and answer.text.startswith(said):
            await on_text(answer.text[len(said) :])
        return answer


#: Between the texts of two message items of one Responses answer, as between a turn's texts.
_ITEMS = "\n\n"
#: The Responses stream's events that carry what the model writes besides its text.
_HEARD = frozenset({"response.function_call_arguments.delta", "response.refusal.delta"})


def _cut_off(missing: str) -> str:
    """The error of a stream that closed before its answer's end."""
    return (
        "The model endpoint's stream ended before the answer was finished "
        f"({missing}; the connection dropped or the endpoint broke off); "
        "the partial answer was not kept."
    )


def _stream_error(event: Any) -> LlmError:
    """A Responses stream's ``error`` event, as the failed call it is."""
    code = getattr(event, "code", None)
    message = getattr(event, "message", None)
    why = "an error event" + (f", {_short(code, 40)}" if isinstance(code, str) and code else "")
    said = f": {_short(message)}" if isinstance(message, str) and message else ""
    return LlmError(storable(f"The model endpoint's stream ended with an error ({why}){said}"))


def _read_response(response: Any, output: Any, *, final_only: bool) -> LlmResponse:
    """A Responses API answer (its ``output`` items) as an :class:`LlmResponse`.

    Message items' texts are joined with a blank line. With ``final_only`` (an answer in a
    format) and any item marked ``phase: "final_answer"``, only those are the answer: the
    ``commentary`` before them would fail the format's check. A ``status`` that is no answer
    raises, as :func:`_responses_finish` says.
    """
    finish = _responses_finish(response)
    messages: list[tuple[Any, str]] = []
    refusals: list[str] = []
    calls: list[ToolCallRequest] = []
    for item in output or ():
        kind = getattr(item, "type", None)
        if kind == "message":
            content = getattr(item, "content", None) or ()
            text = "".join(c.text for c in content if getattr(c, "type", None) == "output_text")
            messages.append((getattr(item, "phase", None), text))
            refusals.extend(c.refusal for c in content if getattr(c, "type", None) == "refusal")
        elif kind == "function_call":
            calls.append(ToolCallRequest(item.call_id or "", item.name or "", item.arguments or ""))
    final = [text for phase, text in messages if phase == "final_answer"] if final_only else []
    texts = final or [text for _, text in messages]
    return LlmResponse(
        text=_ITEMS.join(t for t in texts if t) or None,
        tool_calls=tuple(calls),
        usage=_usage(getattr(response, "usage", None), "input_tokens", "output_tokens"),
        finish_reason="tool_calls" if calls and finish == "stop" else finish,
        model_id=getattr(response, "model", None),
        refusal="".join(refusals) or None,
    )


def _responses_finish(response: Any) -> str:
    """A Responses API answer's ending as a Chat Completions ``finish_reason``.

    ``completed`` (or no status, as some compatible servers send) is ``stop``; ``incomplete``
    is ``content_filter`` when ``incomplete_details.reason`` says the provider's filter
    stopped it, else ``length`` (the output cap, ``max_output_tokens``, or a reason this
    version does not know: either way the answer was cut). Any other status (``failed``,
    ``cancelled``, ``queued``, ``in_progress``) carries no answer: an :class:`LlmError` with
    the endpoint's ``error`` message, as an HTTP failure of the endpoint would be.
    """
    status = getattr(response, "status", None)
    if status is None:
        return "stop"
    if status == "incomplete":
        details = getattr(response, "incomplete_details", None)
        if getattr(details, "reason", None) == "content_filter":
            return "content_filter"
    if isinstance(status, str) and status in RESPONSES_FINISH:
        return RESPONSES_FINISH[status]
    error = getattr(response, "error", None)
    message = getattr(error, "message", None)
    code = getattr(error, "code", None)
    why = f"status '{_short(str(status), 40)}'"
    if isinstance(code, str) and code:
        why += f", {_short(code, 40)}"
    said = f": {_short(message)}" if isinstance(message, str) and message else ""
    raise LlmError(storable(f"The model endpoint gave no answer ({why}){said}"))


def _usage(usage: Any, prompt: str, completion: str) -> Usage:
    """The usage counts an endpoint reported; one it left out or sent as ``null`` is 0.

    0 is what a response without ``usage`` reads as too: the endpoint did not count.
    """
    if usage is None:
        return Usage()
    return Usage(_count(getattr(usage, prompt, None)), _count(getattr(usage, completion, None)))


def _count(value: Any) -> int:
    """A token count as sent, or 0 for anything that is no count (null, text, negative)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return value


def _check_sendable(request: LlmRequest) -> None:
    """Raise ``ValueError`` naming the tool or format JSON cannot carry, before it is sent.

    ``NaN`` or ``Infinity`` (JSON has neither) or text no UTF-8 encoder takes: a request of
    Aptix's own, no fault of the endpoint's. Messages are text Aptix made storable; the tools'
    schemas and the answer's format are the parts that hold numbers.
    """
    parts: list[tuple[str, Any]] = [(f"tools[{i}]", t) for i, t in enumerate(request.tools)]
    parts.append(("response_format", request.response_format))
    for where, value in parts:
        try:
            json.dumps(value, ensure_ascii=False, allow_nan=False).encode()
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"The request to the model cannot be sent as JSON: {where} holds what JSON "
                f"cannot carry ({exc})."
            ) from exc


def to_chat_tool(schema: dict[str, Any]) -> dict[str, Any]:
    """Convert the flat TUL-011 schema to the nested Chat Completions tool shape."""
    function = {k: schema[k] for k in ("name", "description", "parameters") if k in schema}
    return {"type": "function", "function": function}


def _chat_format(request: LlmRequest) -> dict[str, Any]:
    """The ``response_format`` argument of a Chat Completions request, if it asks for one."""
    answer_format = request.response_format
    # Free text is every endpoint's default: not sent, so endpoints that know no
    # response_format keep working for every request that does not need one.
    if answer_format is None or answer_format.get("type") == "text":
        return {}
    return {"response_format": answer_format}


def to_text_format(response_format: dict[str, Any] | None) -> dict[str, Any] | None:
    """A Chat Completions ``response_format`` as the Responses API's ``text.format``.

    The Responses API spells a JSON schema flat (``{"type": "json_schema", "name", "schema",
    "strict"}``), not inside ``json_schema``; None for free text, the default.
    """
    if response_format is None or response_format.get("type") == "text":
        return None
    if response_format.get("type") != "json_schema":
        return dict(response_format)
    spec = response_format.get("json_schema") or {}
    return {"type": "json_schema", **{k: v for k, v in spec.items() if v is not None}}


def to_responses_input(messages: tuple[Message, ...] | list[Message]) -> list[dict[str, Any]]:
    """Convert Chat Completions messages into Responses API input items."""
    items: list[dict[str, Any]] = []
    for message in sendable(messages):
        role = message["role"]
        if role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message["tool_call_id"],
                    "output": message.get("content") or "",
                }
            )
            continue
        if message.get("content"):
            items.append({"role": role, "content": message["content"]})
        for call in message.get("tool_calls") or ():
            items.append(
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": call["function"]["name"],
                    "arguments": call["function"]["arguments"],
                }
            )
    return items


def sendable(messages: tuple[Message, ...] | list[Message]) -> list[Message]:
    """The messages as any endpoint reads them: a refusal the model gave is its message's text.

    Not every OpenAI-compatible endpoint knows an assistant message's ``refusal``; as text,
    the model still sees that it declined.
    """
    sent: list[Message] = []
    for message in messages:
        if "refusal" in message:
            refusal = message["refusal"]
            message = {k: v for k, v in message.items() if k != "refusal"}
            message["content"] = message.get("content") or refusal
        sent.append(message)
    return sent


def _is_openai(base_url: str | None) -> bool:
    """True for OpenAI's own API and Azure OpenAI, which name the output cap differently."""
    if base_url is None:
        return True
    host = (urlsplit(base_url.strip()).hostname or "").lower()
    return host.endswith((".openai.com", ".openai.azure.com")) or host == "openai.com"


def _nul_free(response: LlmResponse) -> LlmResponse:
    # The model is the one source of text that cannot be refused: NUL and lone surrogates
    # become U+FFFD here, before the turn stores it (see aptix.nul).
    return replace(
        response,
        text=None if response.text is None else storable(response.text),
        refusal=None if response.refusal is None else storable(response.refusal),
        tool_calls=tuple(
            ToolCallRequest(storable(c.id), storable(c.name), storable_json(c.arguments))
            for c in response.tool_calls
        ),
    )


def _nul_free_sink(sink: TextSink) -> TextSink:
    async def clean(text: str) -> None:
        await sink(storable(text))

    return clean


#: A key or header value shorter than this is masked nowhere: no secret is that short, and
#: masking it would mask ordinary words ("prod", "v2") in the endpoint's message.
_SHORTEST_SECRET = 8


def _secrets(api_key: str | None, headers: Mapping[str, str] | None) -> tuple[str, ...]:
    """The key and extra header values an endpoint's message must not carry, longest first."""
    values = {api_key or "", *(headers or {}).values()}
    return tuple(sorted((v for v in values if len(v) >= _SHORTEST_SECRET), key=len, reverse=True))


def _hide_secrets(exc: LlmError, secrets: tuple[str, ...]) -> None:
    """Mask ``secrets`` in ``exc``'s message, and drop its cause when that quoted one.

    The endpoint's own error (the ``openai`` exception the message was made from) would show
    the secret again in any traceback logged of ``exc``.
    """
    message = str(exc)
    hidden = message
    for secret in secrets:
        hidden = hidden.replace(secret, MASK)
    if hidden != message:
        exc.args = (hidden,)
        exc.__cause__ = None
        exc.__suppress_context__ = True


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
