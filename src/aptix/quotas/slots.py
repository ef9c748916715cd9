"""``TurnSlots``: the turns each org runs, one slot each, in Redis or in this process.

A slot has a deadline of its own, :data:`SLOT_SECONDS` after its take, which its process
pushes back while it lives (:meth:`TurnSlots.renew`), so a dead process's slots free
themselves within a minute while the org's other turns stay counted, however long they
run. With Redis the slots are a sorted set per org scored by those deadlines. A slot is
named before it is asked for, so a turn that stops waiting for the take can still give it
back, and a take that arrives after its own give-back takes nothing (:mod:`aptix.quotas.entries`).
"""

from __future__ import annotations

import time
from typing import Any

from aptix.quotas.entries import clock, end, unless_ended

__all__ = ["SLOT_SECONDS", "TurnSlots", "renew_every"]

#: A turn slot not given back nor renewed (its process died) is freed after this long.
SLOT_SECONDS = 60

#: Takes the slot ARGV[1] unless ARGV[2] are held at KEYS[1], scored by their deadlines,
#: ARGV[3] ms from now; one given back already (listed at KEYS[2]) is not taken.
_TAKE = (
    clock("KEYS[1]", "KEYS[2]")
    + unless_ended("KEYS[2]", "ARGV[1]", "1")
    + """
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], ms + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""
)
#: Gives back the slot ARGV[1]; one not taken yet is listed at KEYS[2] for ARGV[2] ms.
_GIVE_BACK = end("KEYS[1]", "KEYS[2]", "ARGV[1]", "ARGV[2]")
#: Sets the deadlines of the slots ARGV[2..] held at KEYS[1] to ARGV[1] ms from now. Only
#: slots still held (XX): a renewal that crosses its slot's give-back must not bring it back.
_RENEW = (
    clock("KEYS[1]")
    + """
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', ms + tonumber(ARGV[1]), ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
"""
)


def renew_every() -> float:
    """Seconds between renewals: four a slot's lifetime, so a slow Redis call misses none."""
    return SLOT_SECONDS / 4


class TurnSlots:
    """The running turns of every org: in Redis when the limits are, else in this process."""

    def __init__(self, *, redis: Any, prefix: str) -> None:
        self._redis = redis
        self._prefix = f"{prefix}:turns"
        self._ended = f"{prefix}:turns-ended"
        #: org -> slot -> deadline (``time.monotonic``), without Redis.
        self._running: dict[str, dict[str, float]] = {}
        if redis is not None:
            self._take_script = redis.register_script(_TAKE)
            self._give_back_script = redis.register_script(_GIVE_BACK)
            self._renew_script = redis.register_script(_RENEW)

    async def take(self, org: str, slot: str, limit: int) -> bool:
        """Record ``slot`` as one of ``org``'s running turns, unless it runs ``limit`` already.

        A caller that gets no answer (cancelled, timed out) gives ``slot`` back all the same:
        Redis may have taken it, or take it yet.
        """
        if self._redis is None:
            now = time.monotonic()
            running = self._running.setdefault(org, {})
            for ended in [s for s, deadline in running.items() if deadline <= now]:
                del running[ended]
            if len(running) >= limit:
                return False
            running[slot] = now + SLOT_SECONDS
            return True
        taken = await self._take_script(self._keys(org), [slot, limit, int(SLOT_SECONDS * 1000)])
        return bool(taken)

    async def give_back(self, org: str, slot: str) -> None:
        """End the turn of ``slot``: no longer counted, and not taken should its take come."""
        if self._redis is None:
            running = self._running.get(org, {})
            running.pop(slot, None)
            if not running:
                self._running.pop(org, None)
            return
        await self._give_back_script(self._keys(org), [slot, int(SLOT_SECONDS * 1000)])

    async def renew(self, org: str, slots: list[str]) -> None:
        """Push back the deadlines of ``org``'s ``slots``, whose turns still run here."""
        if self._redis is None:
            running = self._running.get(org, {})
            deadline = time.monotonic() + SLOT_SECONDS
            for slot in slots:
                if slot in running:
                    running[slot] = deadline
            return
        await self._renew_script(self._keys(org)[:1], [int(SLOT_SECONDS * 1000), *slots])

    def _keys(self, org: str) -> list[str]:
        """The org's running turns, and those given back before their takes came."""
        return [f"{self._prefix}:{org}", f"{self._ended}:{org}"]
