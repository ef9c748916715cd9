"""Conversation fingerprints: how a stateless chat client's next request finds its session.

An OpenAI-style client resends the whole conversation with every request. After each answer
the server stores the fingerprint of the conversation as the client now holds it (its
messages plus the answer); the next request's earlier messages hash to the same value, and
the lookup finds the session. A new message continues only a session's newest state, and a
fingerprint that two sessions share finds neither.
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Connection, Table, bindparam, exists, insert, select

from aptix.db.engine import Database
from aptix.db.types import utc_now
from aptix.sessions.tables import FingerprintRow

__all__ = ["ConversationFingerprints", "Remembered"]


_TABLE = cast(Table, FingerprintRow.__table__)
_LATER = _TABLE.alias("later")
#: Only a session's newest fingerprint is its conversation now: a client sending a new
#: message after an older state has forked from it (an edited message, a regenerated
#: answer), and continuing the session would put what it edited away back in front of the
#: model. Tool results may still name an older state: the session's ledger then refuses them
#: or says they were already posted.
_FIND = (
    select(_TABLE.c.session_id, _TABLE.c.model)
    .where(
        _TABLE.c.org == bindparam("org"),
        _TABLE.c.user_id == bindparam("user"),
        _TABLE.c.fingerprint == bindparam("fingerprint"),
    )
    .limit(50)
)
_FIND_CURRENT = _FIND.where(
    ~exists().where(_LATER.c.session_id == _TABLE.c.session_id, _LATER.c.id > _TABLE.c.id)
)
_LAST_MODEL = (
    select(_TABLE.c.model)
    .where(_TABLE.c.session_id == bindparam("sid"))
    .order_by(_TABLE.c.id.desc())
    .limit(1)
)
_INSERT = insert(_TABLE)


class Remembered:
    """A session found by its conversation, and the model name its last answer carried."""

    __slots__ = ("model", "session_id")

    def __init__(self, session_id: str, model: str) -> None:
        self.session_id = session_id
        self.model = model


class ConversationFingerprints:
    """Stores and finds conversation fingerprints, scoped to the caller's org and user."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def find(
        self, org: str, user: str, fingerprint: str, *, current: bool = True
    ) -> Remembered | None:
        """The one session of this caller whose conversation hashes to ``fingerprint``.

        With ``current``, only a session's conversation as it now stands counts, not an
        earlier state of it. None when no session matches, or when more than one does (the
        client's conversation is then ambiguous, and continuing either would be a guess).
        """
        query = _FIND_CURRENT if current else _FIND

        def read(tx: Connection) -> list[Any]:
            params = {"org": org, "user": user, "fingerprint": fingerprint}
            return list(tx.execute(query, params).all())

        rows = await self._db.run_one(read)
        sessions = {row.session_id for row in rows}
        if len(sessions) != 1:
            return None
        return Remembered(rows[-1].session_id, rows[-1].model)

    async def last_model(self, session_id: str) -> str | None:
        """The model name the session's last answer on this endpoint carried, if any."""

        def read(tx: Connection) -> str | None:
            value = tx.execute(_LAST_MODEL, {"sid": session_id}).scalar()
            return None if value is None else str(value)

        return await self._db.run_one(read)

    async def remember(
        self, *, org: str, user: str, session_id: str, fingerprint: str, model: str
    ) -> None:
        """Record that ``session_id`` now holds the conversation hashing to ``fingerprint``."""
        values = {
            "org": org,
            "user_id": user,
            "session_id": session_id,
            "fingerprint": fingerprint,
            "model": model,
            "created_at": utc_now(),
        }

        def write(tx: Connection) -> None:
            tx.execute(_INSERT, values)

        await self._db.run_one(write)
