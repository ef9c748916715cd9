"""A field given in two casings inside a nested object is refused, as at the top level.

Review s2, F4 (round 69): ``{"address": {"streetName": "a", "street_name": "b"}}`` ran the
tool with ``street_name='b'`` and dropped ``"a"`` without a word, where the same mistake at
the top level is refused. The nested objects are matched to their fields as pydantic reads
the arguments, so the refusal costs no second parse of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

import aptix
from aptix.testing import RecordingLogger
from aptix.tools.context import AgentToolExecutionContext

CONTEXT = AgentToolExecutionContext(org="acme", user="ann", conversation_id="c")
RAN: list[str] = []


class Address(BaseModel):
    street_name: str
    zip_code: str | None = None


@aptix.tool(usage="Ships an order.")
async def ship(
    address: Address,
    order_id: int,
    stops: list[Address] | None = None,
    by_name: dict[str, Address] | None = None,
) -> str:
    """Ships an order.

    Args:
        address: Where to.
        order_id: Which order.
        stops: On the way.
        by_name: Named places.
    """
    RAN.append(address.street_name)
    return f"{address.street_name} {order_id}"


@pytest.mark.parametrize(
    ("arguments", "refusal"),
    [
        (
            {"address": {"streetName": "a", "street_name": "b"}, "orderId": 1},
            "'address.street_name' is given twice ('streetName' and 'street_name')",
        ),
        (
            {"address": {"street_name": "b", "StreetName": "a"}, "orderId": 1},
            "'address.street_name' is given twice ('street_name' and 'StreetName')",
        ),
        (  # neither spelling is the documented one
            {"Address": {"StreetName": "a", "streetName": "b", "STREET_NAME": "c"}, "orderId": 1},
            "'address.street_name' is given twice ('StreetName' and 'streetName' and "
            "'STREET_NAME')",
        ),
        (
            {"address": {"streetName": "a"}, "orderId": 1, "stops": [{}, {"zip": 1}]},
            None,  # no repetition: the tool's own validation speaks
        ),
        (
            {
                "address": {"streetName": "a"},
                "orderId": 1,
                "stops": [{"streetName": "s"}, {"streetName": "t", "StreetName": "u"}],
            },
            "'stops.1.street_name' is given twice ('streetName' and 'StreetName')",
        ),
        (
            {
                "address": {"streetName": "a"},
                "orderId": 1,
                "byName": {"home": {"zipCode": "1", "zip_code": "2", "streetName": "h"}},
            },
            "'byName.home.zip_code' is given twice ('zipCode' and 'zip_code')",
        ),
        (  # a top-level key read by its letters alone (ORDERID) beside the documented one
            {"address": {"streetName": "a"}, "ORDERID": 1, "orderId": 2},
            "'orderId' is given twice ('ORDERID' and 'orderId')",
        ),
    ],
)
async def test_a_nested_field_in_two_casings_is_refused_and_the_tool_does_not_run(
    arguments: dict[str, Any], refusal: str | None
) -> None:
    RAN.clear()
    told = await ship(RecordingLogger()).execute(json.dumps(arguments), CONTEXT)
    assert told.result is None
    if refusal is None:
        assert "given twice" not in (told.error_message or "")
    else:
        assert told.error_message == f"{refusal}: use one casing per field."
    assert RAN == []


async def test_an_outside_key_on_the_path_is_shown_escaped() -> None:
    arguments = {
        "address": {"streetName": "a"},
        "orderId": 1,
        "byName": {"h\u0000o\u202eme\n": {"streetName": "x", "street_name": "y"}},
    }
    told = await ship(RecordingLogger()).execute(json.dumps(arguments), CONTEXT)
    assert told.error_message == (
        "'byName.h\\u0000o\\u202eme\\u000a.street_name' is given twice "
        "('streetName' and 'street_name'): use one casing per field."
    )


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
    "arguments",
    [
        '{"address": {"streetName": "a"}, "orderId": 1}',
        '{"Address": {"STREET_NAME": "a", "ZipCode": "1"}, "order_id": 1,'
        ' "stops": [{"street_name": "s"}], "ByName": {"streetName": {"streetName": "h"}}}',
        # The same key twice in one spelling: JSON keeps the last, as at the top level.
        '{"address": {"streetName": "x", "streetName": "a"}, "orderId": 1}',
    ],
)
async def test_nested_fields_given_once_run_without_a_second_parse(
    parses: list[str], arguments: str
) -> None:
    RAN.clear()
    told = await ship(RecordingLogger()).execute(arguments, CONTEXT)
    assert told.result is not None, told.error_message
    assert RAN == ["a"]
    assert parses == []
