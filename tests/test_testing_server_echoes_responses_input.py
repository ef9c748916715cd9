"""The command-line scripted server's echo reads a Responses request's ``input``.

Review r3 (round 69), F3: once the ``--reply`` answers ran out, ``/v1/responses`` always
answered "(scripted server) You said: null": the echo read ``messages``, which only a Chat
Completions request has.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from openai import OpenAI

from aptix.testing.server import ScriptedOpenAIServer
from aptix.testing.server_cli import _echo


@pytest.fixture
def client() -> Iterator[OpenAI]:
    with ScriptedOpenAIServer(respond=_echo) as server:
        yield OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=10)


@pytest.mark.parametrize(
    "said",
    [
        "ping",
        [{"role": "user", "content": "ping"}],
        [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "input_text", "text": "ping"}]},
        ],
        [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "ping"}]}],
    ],
    ids=["string", "message", "last-of-several-parts", "typed-item"],
)
def test_the_echo_repeats_the_last_user_input(client: OpenAI, said: Any) -> None:
    answer = client.responses.create(model="scripted", input=said)
    assert answer.output_text == "(scripted server) You said: ping"


def test_the_streamed_echo_repeats_it_too(client: OpenAI) -> None:
    with client.responses.stream(model="scripted", input="ping") as stream:
        final = stream.get_final_response()
    assert final.output_text == "(scripted server) You said: ping"


def test_the_chat_echo_is_unchanged(client: OpenAI) -> None:
    answer = client.chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "ping"}]
    )
    assert answer.choices[0].message.content == "(scripted server) You said: ping"
