"""The check for a field given in two casings costs a call next to nothing when none is.

Review r6 F2 (round 69): every call of an ``@aptix.tool`` or built-in tool parsed its
arguments a second time and worked out each field's spellings again, 1.6× a hand-written
class. The spellings are worked out once per tool; the arguments are parsed again only when
two spellings of one field could be in them, and the check still refuses every repetition
it refused, escaped keys included.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

import aptix
from aptix.testing import RecordingLogger
from aptix.tools.base import AgentTool
from aptix.tools.builtin.hello_world import HelloWorldTool
from aptix.tools.context import AgentToolExecutionContext

CONTEXT = AgentToolExecutionContext(org="acme", user="ann", conversation_id="c")


@aptix.tool(usage="Sends a message to one user.")
async def notify(user_id: str, text: str, urgent: bool = False) -> str:
    """Sends a message.

    Args:
        user_id: Who gets it.
        text: What it says.
        urgent: Whether it rings.
    """
    return f"{user_id}: {text}{'!' if urgent else ''}"


def _tools() -> list[AgentTool]:
    return [notify(RecordingLogger()), HelloWorldTool(RecordingLogger())]


@aptix.tool(usage="Says how the service is.")
async def status(verbose: bool = False) -> str:
    """Says how the service is.

    Args:
        verbose: Whether to say more.
    """
    return "fine, thank you" if verbose else "fine"


def _optional_only() -> list[AgentTool]:
    return [status(RecordingLogger())]


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts ``json.loads`` is given from here on."""
    seen: list[str] = []
    real: Callable[..., Any] = json.loads

    def counting(text: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", counting)
    return seen


@pytest.mark.parametrize(
    ("arguments", "tools"),
    [
        ('{"userId": "ann", "text": "hi", "name": "Ann"}', _tools),
        ('{"user_id": "ann", "Text": "hi", "Urgent": true, "Name": "Ann"}', _tools),
        ('{"UserId": "ann", "text": "hi", "name": "Ann"}', _tools),
        ('{"userId": "ann", "text": "Name, name and user_id", "name": "Ann"}', _tools),
        ("{}", _optional_only),
        ("", _optional_only),
    ],
)
async def test_arguments_with_each_field_once_are_not_parsed_again(
    parses: list[str], arguments: str, tools: Callable[[], list[AgentTool]]
) -> None:
    for tool in tools():
        done = await tool.execute(arguments, CONTEXT)
        assert done.result is not None, (tool.TOOL_NAME, done.error_message)
    assert parses == []


@pytest.mark.parametrize(
    ("arguments", "refusal"),
    [
        ({"userId": "ann", "user_id": "bob", "text": "hi"}, "('userId' and 'user_id')"),
        ({"UserId": "ann", "user_id": "bob", "text": "hi"}, "('UserId' and 'user_id')"),
        ({"text": "hi", "userId": "ann", "UserId": "bob"}, "('userId' and 'UserId')"),
    ],
)
async def test_a_field_in_two_casings_is_still_refused_by_name(
    arguments: dict[str, Any], refusal: str
) -> None:
    told = await notify(RecordingLogger()).execute(json.dumps(arguments), CONTEXT)
    assert told.result is None
    assert told.error_message == (f"'userId' is given twice {refusal}: use one casing per field.")


async def test_a_key_spelled_with_escapes_is_still_seen() -> None:
    # "user\u005fid" is user_id: a look at the raw text alone would not find it.
    arguments = '{"userId": "ann", "user\\u005fid": "bob", "text": "hi"}'
    told = await notify(RecordingLogger()).execute(arguments, CONTEXT)
    assert told.error_message == (
        "'userId' is given twice ('userId' and 'user_id'): use one casing per field."
    )
    escaped = '{"name": "Ann", "N\\u0061me": "Bob"}'
    hello = await HelloWorldTool(RecordingLogger()).execute(escaped, CONTEXT)
    assert hello.error_message == (
        "'name' is given twice ('name' and 'Name'): use one casing per field."
    )


@pytest.mark.parametrize(
    "arguments",
    [
        # A spelling in a value, or in a nested object, is no repetition.
        '{"userId": "ann", "text": "user_id"}',
        '{"userId": "ann", "text": "{\\"user_id\\": 1}"}',
        # One key twice in one spelling: JSON keeps the last, as it always did.
        '{"userId": "ann", "userId": "bob", "text": "hi"}',
    ],
)
async def test_what_is_no_repetition_still_runs(arguments: str) -> None:
    told = await notify(RecordingLogger()).execute(arguments, CONTEXT)
    assert told.result is not None, told.error_message
