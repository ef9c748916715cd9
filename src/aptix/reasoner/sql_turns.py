"""``SqlTurnStore``: turn records in the shared database.

Every step is one short transaction of a few Core statements (no ORM unit of work): a claim
locks the session row (``SELECT … FOR UPDATE`` on PostgreSQL; SQLite's ``BEGIN IMMEDIATE``
already serializes writers), reads the latest turns, and writes the decision; a checkpoint is
one conditional ``UPDATE`` that only succeeds while the turn still runs at the version read.
Each runs through ``Database.run``: whole on one worker thread on SQLite, one hop per step.
A step of one statement (a checkpoint, a heartbeat) goes through ``Database.run_one``: on
PostgreSQL it commits on its own, one round trip, and still before the caller goes on.
"""

from __future__ import annotations

import copy
import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import (
    Connection,
    CursorResult,
    Executable,
    Row,
    Table,
    bindparam,
    func,
    insert,
    select,
    update,
)

from aptix.db.engine import Database
from aptix.db.types import utc_now
from aptix.errors import NotFoundError
from aptix.llm.types import RESPONSES_FINISH, chat_finish
from aptix.reasoner.claims import Decide, Plan, cancel_turn, mark_dead
from aptix.reasoner.interruptions import FOUND_AT_START, FOUND_BY_A_REQUEST, log_interrupted
from aptix.reasoner.ledger import close_pre_ledger
from aptix.reasoner.merging import carry_endings, merge_closed
from aptix.reasoner.record import OPEN, TurnRecord, TurnStatus
from aptix.reasoner.tables import TurnRow
from aptix.sessions.access import is_owner
from aptix.sessions.models import AgentSession
from aptix.sessions.sql import session_of
from aptix.sessions.tables import SessionRow

__all__ = ["SqlTurnStore"]

_JSON_FIELDS = (
    "messages",
    "pending_calls",
    "tool_calls",
    "model_calls",
    "warnings",
    "result",
    "answers",
    "resume_key",
    "context_dropped",
    "context_summary",
    "response_format",
)
_TURNS = cast(Table, TurnRow.__table__)
_C = _TURNS.c
_SESSIONS = cast(Table, SessionRow.__table__)
# Statements are built once, with bound parameters: building and hashing a statement per
# call cost more than SQLite's own work on it.
_SESSION = select(*_SESSIONS.c).where(
    _SESSIONS.c.id == bindparam("sid"), _SESSIONS.c.org == bindparam("org")
)
_SESSION_LOCKED = _SESSION.with_for_update()
# A turn starting, resuming or ending counts as a use of its session: lists put it first.
_TOUCH = (
    update(_SESSIONS)
    .where(_SESSIONS.c.id == bindparam("sid"), _SESSIONS.c.org == bindparam("in_org"))
    .values(updated_at=bindparam("at"))
)
_NEWEST = (
    select(_TURNS)
    .where(_C.session_id == bindparam("sid"), _C.org == bindparam("org"))
    .order_by(_C.seq.desc())
    .limit(bindparam("n"))
)
_NEWER = _NEWEST.where(_C.seq > bindparam("upto"))
# Versions only grow: their sum over a window's turns changes whenever one of them is rewritten.
_STAMP = select(func.coalesce(func.sum(_C.version), 0)).where(
    _C.session_id == bindparam("sid"),
    _C.org == bindparam("org"),
    _C.seq >= bindparam("lo"),
    _C.seq <= bindparam("upto"),
)
_INSERT = insert(_TURNS)
_UPDATE = update(_TURNS).where(_C.id == bindparam("turn_id"))
_CHECKPOINT = _UPDATE.where(_C.version == bindparam("held"), _C.status == "running")
_HEARTBEAT = _UPDATE.where(_C.status == "running", _C.owner == bindparam("holder"))
_BY_ID = select(_TURNS).where(_C.id == bindparam("turn_id"))
_STATUS = select(_C.status).where(_C.id == bindparam("turn_id"))
#: How many times a save takes outcomes settled into its turn and tries again: each needs
#: another process's settlement between the read and the write.
_CATCH_UPS = 4
#: The memory the windows of frozen turns may take in one process, as :func:`_footprint`
#: estimates it (docs/deployment.md). Bounded in bytes, not turns: a turn holds from 3 KB
#: to megabytes (model text, tool results), and 20,000 turns came to 150 MB of typical ones.
CACHE_BYTES = 64 * 1024 * 1024
#: What a turn read from the database takes in memory beyond its stored JSON, and per byte
#: of it (a least-squares fit over turns of 1-7 KB of JSON: 3,046 + 1.73 per byte).
_RECORD_BYTES, _BYTES_PER_JSON_BYTE = 3_000, 2


@dataclass(slots=True)
class _Window:
    """A session's latest frozen turns (oldest first), all with ``seq <= upto``.

    ``stamp`` is the sum of their versions as read: the claim compares it with the stored sum.
    ``sizes`` are the turns' :func:`_footprint`, in the same order.
    """

    upto: int
    turns: list[TurnRecord]
    stamp: int
    sizes: list[int]
    size: int


class SqlTurnStore:
    """Turns as rows; the transcript and audit lists live in one JSON column.

    Only the latest turn of a session can still change: once a newer turn exists, or a turn
    has completed, it is frozen. Each process keeps the latest frozen turns of the sessions it
    served (a bounded LRU of windows), so a claim reads only the turns newer than its window:
    one row in a busy session, however long it is, and a turn's cost does not grow with the
    session's length. Another process's turns are simply newer rows. A frozen turn is still
    rewritten when the process that ran it settles it (:meth:`settle`: a call it ran ended
    after someone else closed the turn), so the claim also reads the sum of the window's
    versions, one number, and reads the turns afresh when it changed. The windows take at
    most ``cache_bytes`` of memory (estimated), the least recently claimed session's
    leaving first; the latest window stays, however large.
    """

    def __init__(self, database: Database, *, cache_bytes: int = CACHE_BYTES) -> None:
        self._db = database
        self._lock_sessions = not database.is_sqlite
        self._windows: OrderedDict[str, _Window] = OrderedDict()
        self._cached = 0
        self._cache_bytes = cache_bytes

    async def claim(
        self, session_id: str, org: str, user: str, decide: Decide, *, history: int
    ) -> tuple[AgentSession, Plan, list[TurnRecord]]:
        """Lock the caller's session, apply ``decide`` to its latest turn, store the outcome."""
        session_query = _SESSION_LOCKED if self._lock_sessions else _SESSION
        cached = self._windows.get(session_id)
        keys = {"sid": session_id, "org": org, "n": history + 1}

        def transaction(tx: Connection) -> tuple[AgentSession, Plan, list[TurnRecord]]:
            found = tx.execute(session_query, keys).one_or_none()
            # The mode history is not read: no turn uses it.
            session = session_of(found) if found is not None else None
            if session is None or not is_owner(session, org, user):
                raise NotFoundError(f"Unknown session '{session_id}'.")
            window = cached if cached is not None and _fresh(tx, cached, keys) else None
            newer, turn_keys = (
                (_NEWEST, keys) if window is None else (_NEWER, {**keys, "upto": window.upto})
            )
            rows = [_to_record(row) for row in reversed(tx.execute(newer, turn_keys).all())]
            if window is not None and len(rows) <= history:  # the window reaches the rows read
                rows = [*window.turns, *rows][-(history + 1) :]
            plan = decide(rows[-1] if rows else None)
            now = utc_now()
            if plan.run is not None:
                tx.execute(_TOUCH, {"sid": session_id, "in_org": org, "at": now})
            for record in plan.writes():
                record.updated_at = now
                if plan.new and record is plan.run:
                    tx.execute(_INSERT, _row(record))
                else:
                    record.version += 1
                    tx.execute(_UPDATE, {"turn_id": record.id, **_changes(record)})
            return session, plan, rows

        session, plan, rows = await self._db.run(transaction)
        if plan.interrupted is not None:
            log_interrupted([plan.interrupted], FOUND_BY_A_REQUEST)
        # A new turn freezes every turn read; otherwise the latest may still change.
        self._keep(session_id, rows if plan.new else rows[:-1])
        run_id = plan.run.id if plan.run else None
        done = [t for t in rows if t.status not in OPEN and t.id != run_id]
        return session, plan, done[-history:] if history else []

    def _keep(self, session_id: str, frozen: list[TurnRecord]) -> None:
        """Remember ``frozen`` (the latest frozen turns, oldest first) as the session's window."""
        if not frozen:
            return
        old = self._windows.pop(session_id, None)
        # The turns the window already held are the same objects: only new ones are measured.
        known = {id(t): n for t, n in zip(old.turns, old.sizes, strict=True)} if old else {}
        self._cached -= old.size if old is not None else 0
        sizes = [known.get(id(t)) or _footprint(t) for t in frozen]
        stamp = sum(t.version for t in frozen)
        window = _Window(frozen[-1].seq, frozen, stamp, sizes, sum(sizes))
        self._windows[session_id] = window
        self._cached += window.size
        while self._cached > self._cache_bytes and len(self._windows) > 1:
            self._cached -= self._windows.popitem(last=False)[1].size

    async def save(self, turn: TurnRecord) -> bool:
        """Checkpoint ``turn`` if it still runs at the version this run holds.

        Another process may have written into it meanwhile the outcome of a call it ran
        before this run took the turn over (:meth:`settle`): the turn still runs under this
        run, at a newer version. This run then takes those outcomes and saves again.
        """
        for _ in range(_CATCH_UPS):
            if await self._save(turn):
                return True
            stored = await self._read(turn.id)
            if not _settled_into(stored, turn):
                return False
            assert stored is not None
            carry_endings(turn, stored)
            turn.version = stored.version
        return False

    async def _read(self, turn_id: str) -> TurnRecord | None:
        keys = {"turn_id": turn_id}
        row = await self._db.run_one(lambda tx: tx.execute(_BY_ID, keys).one_or_none())
        return _to_record(row) if row is not None else None

    async def _save(self, turn: TurnRecord) -> bool:
        now = utc_now()
        if turn.status != "running":
            turn.lease_until = None
        keys = {
            "turn_id": turn.id,
            "held": turn.version,
            **_changes(turn, version=turn.version + 1, now=now),
        }
        if turn.status == "running":
            saved = await self._db.run_one(_changed(_CHECKPOINT, keys))
        else:  # the turn ends (or waits for its client): its session was used now
            touch = {"sid": turn.session_id, "in_org": turn.org, "at": now}
            saved = await self._db.run(_ending(keys, touch))
        if saved != 1:
            return False
        turn.version += 1
        turn.updated_at = now
        return True

    async def read_session(self, session_id: str, org: str) -> AgentSession | None:
        """The session's row as stored now (without its mode history): one statement."""
        keys = {"sid": session_id, "org": org}
        row = await self._db.run_one(lambda tx: tx.execute(_SESSION, keys).one_or_none())
        return session_of(row) if row is not None else None

    async def settle(self, turn: TurnRecord) -> TurnRecord | None:
        """Merge ``turn`` into the turn stored under its id; the merged turn, or None.

        A closed turn takes what ran here (``merge_closed``). A turn another run holds open
        (it took the turn over: a resume retried after this run's lease ran out) takes the
        outcomes of the calls it reads as lost; that run adopts them at its next save.
        """
        query = select(_TURNS).where(_C.id == turn.id)
        session_query = _SESSION_LOCKED if self._lock_sessions else _SESSION
        if self._lock_sessions:
            query = query.with_for_update()
        keys = {"sid": turn.session_id, "org": turn.org}

        def transaction(tx: Connection) -> TurnRecord | None:
            # The session's lock first, as a claim takes it: a claim reading the turn to
            # resume it never writes over these outcomes with the copy it read before.
            tx.execute(session_query, keys)
            row = tx.execute(query).one_or_none()
            if row is None:
                return None
            stored = _to_record(row)
            if stored.status in OPEN:
                if stored.owner == turn.owner and stored.status == "running":
                    return None  # still this run's: a save, not a settlement
                if not carry_endings(stored, turn):
                    return stored
                merged = stored
            else:
                merged = merge_closed(stored, copy.deepcopy(turn))
            merged.version += 1
            merged.updated_at = utc_now()
            tx.execute(_UPDATE, {"turn_id": turn.id, **_changes(merged)})
            return merged

        return await self._db.run(transaction)

    async def heartbeat(self, turn: TurnRecord, until: Any) -> bool:
        """Extend the lease of a running turn still held by ``turn.owner``."""
        keys = {"turn_id": turn.id, "holder": turn.owner, "lease_until": until}
        return await self._db.run_one(_changed(_HEARTBEAT, keys)) == 1

    async def status(self, turn: TurnRecord) -> TurnStatus | None:
        """The status stored for ``turn`` now (None when it is not stored): one read."""
        keys = {"turn_id": turn.id}
        found = await self._db.run_one(lambda tx: tx.execute(_STATUS, keys).scalar_one_or_none())
        return cast("TurnStatus | None", found)

    async def cancel(self, session_id: str, org: str, turn_id: str) -> TurnRecord:
        """Mark a running or pending turn ``cancelled``."""
        query = select(_TURNS).where(_C.id == turn_id, _C.session_id == session_id, _C.org == org)
        if self._lock_sessions:
            query = query.with_for_update()

        def transaction(tx: Connection) -> TurnRecord:
            row = tx.execute(query).one_or_none()
            if row is None:
                raise NotFoundError(f"Unknown turn '{turn_id}' in session '{session_id}'.")
            record = cancel_turn(_to_record(row))
            tx.execute(_UPDATE, {"turn_id": turn_id, **_changes(record)})
            return record

        return await self._db.run(transaction)

    async def sweep(self) -> int:
        """Mark running turns of dead processes (expired lease, or gone on this host)."""
        now = utc_now()

        def transaction(tx: Connection) -> list[TurnRecord]:
            rows = tx.execute(select(_TURNS).where(_C.status == "running")).all()
            dead = [r for r in map(_to_record, rows) if mark_dead(r, now)]
            marked = []
            for record in dead:
                record.version += 1
                done = tx.execute(
                    update(_TURNS)
                    .where(_C.id == record.id, _C.status == "running")
                    .values(_changes(record))
                )
                if done.rowcount:  # not closed by another process meanwhile
                    marked.append(record)
            return marked

        marked = await self._db.run(transaction)
        log_interrupted([r for r in marked if r.status == "interrupted"], FOUND_AT_START)
        return len(marked)

    async def list_turns(
        self, session_id: str, org: str, *, limit: int | None = None, before: int | None = None
    ) -> list[TurnRecord]:
        """The session's turns, oldest first: the newest ``limit`` with ``seq < before``."""
        query = (
            select(_TURNS).where(_C.session_id == session_id, _C.org == org).order_by(_C.seq.desc())
        )
        if before is not None:
            query = query.where(_C.seq < before)
        if limit is not None:
            query = query.limit(limit)
        rows = await self._db.run_one(lambda tx: tx.execute(query).all())
        return [_to_record(row) for row in reversed(rows)]


def _settled_into(stored: TurnRecord | None, ours: TurnRecord) -> bool:
    """Whether a save of ``ours`` failed only because another process settled into it.

    The turn still runs under this very run (only a settlement writes a running turn under
    another's owner), at a newer version than this run holds.
    """
    return (
        stored is not None
        and stored.status == "running"
        and stored.owner == ours.owner
        and stored.version > ours.version
    )


def _fresh(tx: Connection, window: _Window, keys: dict[str, Any]) -> bool:
    """Whether no turn of ``window`` was rewritten since it was read."""
    bounds = {"lo": window.turns[0].seq, "upto": window.upto}
    return bool(tx.execute(_STAMP, {**keys, **bounds}).scalar_one() == window.stamp)


def _changed(statement: Executable, keys: dict[str, Any]) -> Callable[[Connection], int]:
    """A transaction running ``statement`` and answering how many rows it changed."""
    return lambda tx: cast(CursorResult[Any], tx.execute(statement, keys)).rowcount


def _ending(keys: dict[str, Any], touch: dict[str, Any]) -> Callable[[Connection], int]:
    """The checkpoint that ends a turn, with its session touched; how many turns it changed."""

    def transaction(tx: Connection) -> int:
        # The session row first, as a claim locks it: two transactions never wait on each
        # other's row the other way round.
        tx.execute(_TOUCH, touch)
        return _changed(_CHECKPOINT, keys)(tx)

    return transaction


def _data(turn: TurnRecord) -> dict[str, Any]:
    data = {name: getattr(turn, name) for name in _JSON_FIELDS}
    # A batch's other calls end while an outcome is being saved (on SQLite the row is written
    # on the worker thread): the save stores the calls as they were when it was asked for.
    data["tool_calls"] = [dict(entry) for entry in turn.tool_calls]
    return data


def _changes(turn: TurnRecord, *, version: int | None = None, now: Any = None) -> dict[str, Any]:
    return {
        "status": turn.status,
        "text": turn.text,
        "data": _data(turn),
        "updated_at": now or turn.updated_at,
        "version": turn.version if version is None else version,
        "lease_until": turn.lease_until,
        "owner": turn.owner,
    }


def _row(turn: TurnRecord) -> dict[str, Any]:
    return {
        **_changes(turn),
        "id": turn.id,
        "session_id": turn.session_id,
        "org": turn.org,
        "user_id": turn.user,
        "seq": turn.seq,
        "instruction": turn.instruction,
        "created_at": turn.created_at,
    }


def _footprint(turn: TurnRecord) -> int:
    """About what ``turn``, as read from the database, takes in memory."""
    stored = len(json.dumps(_data(turn), default=str))
    return _RECORD_BYTES + _BYTES_PER_JSON_BYTE * stored


def _to_record(row: Row[Any]) -> TurnRecord:
    data = _in_chat_words(row.data or {})
    record = TurnRecord(
        id=row.id,
        session_id=row.session_id,
        org=row.org,
        user=row.user_id,
        seq=row.seq,
        instruction=row.instruction,
        status=row.status,
        text=row.text,
        created_at=row.created_at,
        updated_at=row.updated_at,
        version=row.version,
        lease_until=row.lease_until,
        owner=row.owner,
        **{name: data.get(name) or _empty(name) for name in _JSON_FIELDS},
    )
    # Closed as read (by GET, the model's context, a resume); the row stays as it is.
    close_pre_ledger(record)
    return record


def _in_chat_words(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the finish reasons stored by older versions in this version's words.

    Before round 67 a turn run with the Responses API stored the answer's ``status``
    (``completed``, ``incomplete``) as its finish reason, in its model calls and in the
    results it answered: read here, where every stored turn is read, as :func:`chat_finish`
    says, so the session's ``modelCalls``, the console, a replayed answer and the
    OpenAI-compatible wire all see ``stop``, ``tool_calls`` or ``length``.
    """
    for call in data.get("model_calls") or ():
        if isinstance(call, dict) and call.get("finishReason") in RESPONSES_FINISH:
            call["finishReason"] = chat_finish(
                call["finishReason"], calls=bool(call.get("toolCalls"))
            )
    answers = data.get("answers")
    bodies = [data.get("result"), *(answers.values() if isinstance(answers, dict) else ())]
    for body in bodies:
        if isinstance(body, dict) and body.get("finishReason") in RESPONSES_FINISH:
            waiting = any(
                isinstance(c, dict)
                and c.get("requiresClientExecution")
                and c.get("outcome", "pending") == "pending"
                for c in body.get("toolCalls") or ()
            )
            body["finishReason"] = chat_finish(body["finishReason"], calls=waiting)
    return data


def _empty(name: str) -> Any:
    if name in ("result", "resume_key", "context_dropped", "context_summary", "response_format"):
        return None
    return {} if name == "answers" else []
