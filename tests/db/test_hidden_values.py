"""A failed PostgreSQL statement never carries a bound value into an error or a log."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterator

import pytest
from sqlalchemy import text

from aptix.db.engine import create_engine
from tests.databases import create_pg_database, drop_pg_database

BOUND = "Tr0ub4dor model text\ud800"


@pytest.fixture
def pg_url() -> Iterator[str]:
    url = create_pg_database()
    yield url
    drop_pg_database(url)


async def test_a_value_the_driver_cannot_encode_is_not_in_the_error_chain(pg_url: str) -> None:
    engine = create_engine(pg_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE t (body text)"))
        with pytest.raises(Exception) as caught:  # noqa: PT011 - the driver's error kind
            async with engine.begin() as conn:
                await conn.execute(text("INSERT INTO t VALUES (:body)"), {"body": BOUND})
    finally:
        await engine.dispose()
    shown = "".join(traceback.format_exception(caught.value))
    logged = logging.Formatter().formatException(
        (type(caught.value), caught.value, caught.value.__traceback__)
    )
    assert "invalid input for query argument $1: (value hidden)" in str(caught.value)
    for where in (shown, logged):
        assert "Tr0ub4dor" not in where
