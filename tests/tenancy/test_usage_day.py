"""``GET /v1/usage?day=``: only a real calendar day written ``YYYY-MM-DD`` is read."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from aptix.api import create_app
from aptix.runtime import Runtime
from tests.tenancy.conftest import bearer


@pytest.fixture
async def admin(keyed: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(runtime=keyed))
    async with httpx.AsyncClient(
        transport=transport, base_url="http://test", headers=bearer("k-admin")
    ) as client:
        yield client


@pytest.mark.parametrize(
    ("day", "why"),
    [
        ("0000-00-00", "'day' 0000-00-00 is not a calendar day (year 0 is out of range)"),
        ("2021-02-30", "'day' 2021-02-30 is not a calendar day (day is out of range for month)"),
        ("2020-13-45", "'day' 2020-13-45 is not a calendar day (month must be in 1..12)"),
        ("\u0662\u0660\u0662\u0661-\u0660\u0661-\u0660\u0661", "'day' is not a day"),  # ٢٠٢١-٠١-٠١
        ("2021-1-01", "'day' is not a day"),
        ("", "'day' is not a day"),
    ],
)
async def test_a_day_that_is_not_in_the_calendar_is_a_422(
    admin: httpx.AsyncClient, day: str, why: str
) -> None:
    response = await admin.get("/v1/usage", params={"day": day})
    assert response.status_code == 422, (day, response.text)
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["message"].startswith(why), error["message"]
    assert "YYYY-MM-DD in ASCII digits, e.g. 2024-02-29" in error["message"]


@pytest.mark.parametrize("day", ["2024-02-29", "0001-01-01", "9999-12-31"])
async def test_a_calendar_day_is_read(admin: httpx.AsyncClient, day: str) -> None:
    response = await admin.get("/v1/usage", params={"day": day})
    assert response.status_code == 200, response.text
    assert response.json()["day"] == day


async def test_the_documented_day_is_ascii_and_a_date(admin: httpx.AsyncClient) -> None:
    # Schema-driven clients (and schemathesis) generate only what the document allows.
    document = (await admin.get("/openapi.json")).json()
    (day,) = document["paths"]["/v1/usage"]["get"]["parameters"]
    assert day["schema"]["format"] == "date"
    assert day["schema"]["pattern"] == "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
