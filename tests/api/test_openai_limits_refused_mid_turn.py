"""A turn the limits refused a model call of is no model error, also once they answer again.

The endpoint asks the limits again to answer such a turn; a Redis back by then (or a budget
renewed) left only the stored code to say what happened.
"""

from __future__ import annotations

import httpx
import pytest

from aptix.api import create_app
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.quotas.metered import LimitsUnavailableError, TokenBudgetError
from aptix.runtime import Runtime
from aptix.testing import FunctionModel
from tests.api.conftest import A


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (LimitsUnavailableError("Limits cannot be checked right now."), 503, "limits_unavailable"),
        (TokenBudgetError("Token budget reached."), 429, "token_budget_exhausted"),
    ],
)
async def test_the_stored_code_answers_when_the_limits_no_longer_refuse(
    keyed_runtime: Runtime, error: Exception, status: int, code: str
) -> None:
    async def refused(request: LlmRequest) -> LlmResponse:
        raise error

    app = create_app(runtime=keyed_runtime, model=FunctionModel(refused))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test/v1", headers=A) as c:
        answer = await c.post(
            "/chat/completions",
            json={"model": "aptix-general", "messages": [{"role": "user", "content": "hi"}]},
        )
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] == code
    assert answer.headers["Retry-After"] == "5"
