"""A conversation whose session is pruned as its next request comes starts afresh.

``/v1/chat/completions`` finds a stateless client's session by the fingerprint of the
conversation it resends. ``aptix sessions prune`` (another process) deletes a session with its
fingerprints, so a request after the prune starts a new session; but one whose lookup found the
session just before the prune deleted it answered 404 "Unknown session": the client's
conversation failed for good on a race. It now starts afresh too.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from openai import AsyncOpenAI

from aptix.db.types import utc_now
from aptix.reasoner.pruning import prune_sessions
from aptix.runtime import Runtime
from aptix.sessions.fingerprints import ConversationFingerprints, Remembered
from aptix.testing import ScriptedModel, reply


async def test_a_session_pruned_after_its_lookup_gives_a_new_one(
    keyed_runtime: Runtime,
    model: ScriptedModel,
    openai_client: AsyncOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model.add(reply("from the first session"), reply("a new start"))
    first: list[dict[str, Any]] = [{"role": "user", "content": "hey"}]
    raw = await openai_client.chat.completions.with_raw_response.create(
        model="aptix-general",
        messages=first,  # type: ignore[arg-type]
    )
    old_session = raw.headers["x-aptix-session"]
    found: list[str] = []
    find = ConversationFingerprints.find

    async def find_then_prune(self: ConversationFingerprints, *args: Any, **kw: Any) -> Any:
        remembered: Remembered | None = await find(self, *args, **kw)
        if remembered is not None and not found:
            found.append(remembered.session_id)
            # The prune commits between the lookup and the turn's claim.
            await prune_sessions(keyed_runtime.database, utc_now() + timedelta(days=1))
        return remembered

    monkeypatch.setattr(ConversationFingerprints, "find", find_then_prune)
    raw = await openai_client.chat.completions.with_raw_response.create(
        model="aptix-general",
        messages=[  # type: ignore[arg-type]
            *first,
            {"role": "assistant", "content": "from the first session"},
            {"role": "user", "content": "more"},
        ],
    )
    assert found == [old_session]
    assert raw.http_response.status_code == 200
    assert raw.parse().choices[0].message.content == "a new start"
    new_session = raw.headers["x-aptix-session"]
    assert new_session != old_session
    assert await keyed_runtime.services.sessions.get_session(old_session, "acme") is None
    # The new session starts with the conversation the client sent as its context.
    context = str(model.requests[-1].messages)
    assert "from the first session" in context
    assert "more" in context
