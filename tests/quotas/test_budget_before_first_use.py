"""``/v1/usage``'s budget before its window starts: the full window, never "renews in 1 s".

The windows start at the first use (docs/deployment.md). Before it no window exists, and the
limits library reports one ending now, which read as the budget renewing in 1 s, again and
again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from aptix.llm.types import Usage
from aptix.quotas.limiter import Quotas

DAY = 86_400


@pytest.fixture(params=["memory", "redis"])
async def quotas(request: pytest.FixtureRequest) -> AsyncIterator[Quotas]:
    if request.param == "memory":
        made = Quotas(token_budget="2000/day")
    else:
        prefix = request.getfixturevalue("prefix")
        made = Quotas(
            token_budget="2000/day", redis_url="redis://127.0.0.1:6379", key_prefix=prefix
        )
    yield made
    await made.aclose()


async def test_a_budget_not_used_yet_renews_a_full_window_after_its_first_use(
    quotas: Quotas,
) -> None:
    before = await quotas.budget_state("acme")
    assert before == {"limit": "2000/day", "remaining": 2000, "resetSeconds": DAY}

    await quotas.spend("acme", "key", "ann", Usage(prompt_tokens=100, completion_tokens=11))

    after = await quotas.budget_state("acme")
    assert after is not None
    assert after["remaining"] == 1889
    assert DAY - 5 <= after["resetSeconds"] <= DAY
    # Another org's budget has not started either.
    untouched = await quotas.budget_state("other")
    assert untouched is not None
    assert untouched["resetSeconds"] == DAY
