"""``BudgetHolds``: the model calls in progress and what each holds of its org's token budget.

A model call holds its prompt's estimate on the budget's count from its start, so calls
starting meanwhile see it (:meth:`aptix.quotas.Quotas.reserve`). The holds are also listed
apart, one entry per call, so that a refusal can tell a budget spent from one that calls in
progress hold and will partly give back when they end. With Redis the list is a sorted set
per org, scored by each entry's deadline: an entry its process never ended (the process
died) goes after :data:`HOLD_SECONDS`, while its tokens stay counted, as spent.

A hold is settled in the window it was taken in, or not at all: once that window is gone
(it renewed, or Redis lost its keys) the count holds other calls' tokens, which a give-back
would take off. With Redis each window has a set of the holds taken in it, emptied when a
new window starts and gone with the window; in memory each hold remembers its window's end.

A hold is named before it is asked for (:meth:`Hold.of`), so a caller that stops waiting for
the take can still end it, and a take that arrives after its own give-back holds nothing, as
a turn's slot (:mod:`aptix.quotas.entries`).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from limits.aio.storage import MemoryStorage

from aptix.quotas.entries import clock, end, unless_ended

__all__ = ["HOLD_SECONDS", "NO_HOLD", "BudgetHolds", "Hold", "Tally"]

#: How long a hold's entry is listed when its call never ends it (its process died).
HOLD_SECONDS = 900

_NOW = clock("KEYS[2]", "KEYS[4]")
#: The calls listed at KEYS[2] whose holds are in the window of KEYS[3], and the tokens they
#: hold (each entry ends in ``:<tokens>``).
_HELD = """
local entries = redis.call('ZRANGE', KEYS[2], 0, -1)
local calls = 0
local held = 0
for _, entry in ipairs(entries) do
  if redis.call('SISMEMBER', KEYS[3], entry) == 1 then
    calls = calls + 1
    held = held + tonumber(string.match(entry, '(%d+)$'))
  end
end
"""
#: Adds ARGV[1] tokens to the count KEYS[1]; the first tokens start a window of ARGV[2]
#: seconds, as the ``limits`` library counts, whose set of holds KEYS[3] starts empty.
_COUNT = """
local function count(tokens, seconds)
  if redis.call('INCRBY', KEYS[1], tokens) == tokens then
    redis.call('EXPIRE', KEYS[1], seconds)
    redis.call('DEL', KEYS[3])
  end
end
"""
#: Counts the tokens a call without a hold used (KEYS[2] unused).
_CHARGE = _COUNT + "count(tonumber(ARGV[1]), ARGV[2])\n"
#: Holds ARGV[1] tokens on the count KEYS[1] while it is below ARGV[2] (a window of ARGV[3]
#: seconds), listing the entry ARGV[4] for ARGV[5] ms at KEYS[2] and in the window's set
#: KEYS[3], which ends with the window; else the count and the holds, as they were then.
#: An entry already ended (listed at KEYS[4]) is not taken: its caller has stopped waiting.
_TAKE = (
    _NOW
    + _COUNT
    + unless_ended("KEYS[4]", "ARGV[4]", "{1, 0, 0, 0}")
    + """
local count_now = tonumber(redis.call('GET', KEYS[1]) or '0')
if count_now < tonumber(ARGV[2]) then
  count(tonumber(ARGV[1]), ARGV[3])
  redis.call('ZADD', KEYS[2], ms + tonumber(ARGV[5]), ARGV[4])
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
  redis.call('SADD', KEYS[3], ARGV[4])
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 then
    redis.call('PEXPIRE', KEYS[3], left)
  end
  return {1, 0, 0, 0}
end
"""
    + _HELD
    + "return {0, count_now, calls, held}\n"
)
#: The count KEYS[1] and the holds listed at KEYS[2] in its window, at one instant.
_TALLY = _NOW + _HELD + "return {tonumber(redis.call('GET', KEYS[1]) or '0'), calls, held}\n"
#: Ends the hold ARGV[1]: unlisted, and, while its window lasts, its count changed by ARGV[2]
#: (up, or down to no lower than zero). A window gone holds other calls' tokens: unchanged.
#: One not listed (its take has not come, or never will) is listed at KEYS[4] as ended, for
#: ARGV[3] ms, so that its take, should it come, holds nothing.
_SETTLE = (
    end("KEYS[2]", "KEYS[4]", "ARGV[1]", "ARGV[3]")
    + """
if redis.call('SREM', KEYS[3], ARGV[1]) == 1 and redis.call('EXISTS', KEYS[1]) == 1 then
  local change = tonumber(ARGV[2])
  if change > 0 then
    redis.call('INCRBY', KEYS[1], change)
  elseif change < 0 then
    local count = tonumber(redis.call('GET', KEYS[1]))
    redis.call('DECRBY', KEYS[1], math.min(count, -change))
  end
end
"""
)


@dataclass(frozen=True, slots=True)
class Hold:
    """Tokens a model call holds on its org's budget until it ends; ``entry`` lists it."""

    tokens: int
    entry: str = ""

    @classmethod
    def of(cls, tokens: int) -> Hold:
        """A hold of ``tokens`` under a name of its own, for :meth:`BudgetHolds.take`."""
        return cls(tokens, f"{uuid.uuid4().hex}:{tokens}")


#: What a call holds when nothing is (no budget, or Redis is down and the limits are open).
NO_HOLD = Hold(0)


@dataclass(frozen=True, slots=True)
class Tally:
    """An org's budget count at one instant, and what calls in progress held of it."""

    count: int
    calls: int
    held: int

    @property
    def spent(self) -> int:
        """What the count holds besides the holds: the calls that ended."""
        return max(0, self.count - self.held)


class BudgetHolds:
    """The holds of every org: in Redis when the limits are, else in this process."""

    def __init__(
        self, *, redis: Any, memory: MemoryStorage | None, prefix: str, limits_prefix: str
    ) -> None:
        self._redis = redis
        self._memory = memory
        self._prefix = f"{prefix}:holds"
        self._windows = f"{prefix}:holds-in"
        self._ended = f"{prefix}:holds-ended"
        self._limits_prefix = limits_prefix
        #: org -> entry -> (tokens, the end of the window they are held in), without Redis.
        self._listed: dict[str, dict[str, tuple[int, float]]] = {}
        if redis is not None:
            self._take_script = redis.register_script(_TAKE)
            self._tally_script = redis.register_script(_TALLY)
            self._charge_script = redis.register_script(_CHARGE)
            self._settle_script = redis.register_script(_SETTLE)

    async def take(self, org: str, key: str, hold: Hold, limit: int, expiry: int) -> Hold | Tally:
        """Take ``hold`` on the count ``key`` while it is below ``limit``, else the tally.

        ``expiry`` is the window's length, which starts with the count's first tokens. A caller
        that gets no answer (cancelled, timed out) ends ``hold`` all the same: Redis may have
        taken it, or take it yet.
        """
        tokens, entry = hold.tokens, hold.entry
        if self._memory is None:
            answer = await self._take_script(
                self._keys(org, key), [tokens, limit, expiry, entry, HOLD_SECONDS * 1000]
            )
            taken, count, calls, held = (int(value) for value in answer)
            return hold if taken else Tally(count, calls, held)
        count = await self._memory.incr(key, expiry, amount=tokens)
        # No await from the count to the list: other calls see both or neither.
        if count - tokens < limit:
            window = self._memory.expirations[key]
            self._listed.setdefault(org, {})[entry] = (tokens, window)
            return hold
        tally = self._memory_tally(org, key, count - tokens)
        await self._memory.decr(key, tokens)  # refused: a hold only for calls that run
        return tally

    async def tally(self, org: str, key: str) -> Tally:
        """The count ``key`` and the org's holds in its window."""
        if self._memory is None:
            answer = await self._tally_script(self._keys(org, key), [])
            count, calls, held = (int(value) for value in answer)
            return Tally(count, calls, held)
        return self._memory_tally(org, key, await self._memory.get(key))

    async def charge(self, org: str, key: str, tokens: int, expiry: int) -> None:
        """Count ``tokens`` a call used without a hold on ``key`` (a window of ``expiry`` s)."""
        if self._memory is None:
            await self._charge_script(self._keys(org, key), [tokens, expiry])
        else:
            await self._memory.incr(key, expiry, amount=tokens)

    async def settle(self, org: str, key: str, hold: Hold, change: int) -> None:
        """End ``hold``, changing the count ``key`` by ``change`` if its window still lasts."""
        if not hold.entry:
            return
        if self._memory is None:
            await self._settle_script(
                self._keys(org, key), [hold.entry, change, HOLD_SECONDS * 1000]
            )
            return
        listed = self._listed.get(org, {})
        taken = listed.pop(hold.entry, None)
        if not listed:
            self._listed.pop(org, None)
        if taken is None or change == 0:
            return
        await self._memory.get(key)  # forgets a window that ended
        if self._memory.expirations.get(key) != taken[1]:
            return  # another window's count: the hold is not in it
        if change > 0:  # within the window: its end stays where it is
            await self._memory.incr(key, taken[1] - time.time(), amount=change)
        else:
            await self._memory.decr(key, -change)

    def _keys(self, org: str, key: str) -> list[str]:
        """The count, the org's holds, those in the count's window, and those ended early."""
        return [
            f"{self._limits_prefix}:{key}",
            f"{self._prefix}:{org}",
            f"{self._windows}:{key}",
            f"{self._ended}:{org}",
        ]

    def _memory_tally(self, org: str, key: str, count: int) -> Tally:
        window = self._memory.expirations.get(key) if self._memory is not None else None
        held = [tokens for tokens, end in self._listed.get(org, {}).values() if end == window]
        return Tally(count, len(held), sum(held))
