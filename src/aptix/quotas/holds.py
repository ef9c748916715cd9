"""``BudgetHolds``: the model calls in progress and what each holds of its org's token budget.

A model call holds its prompt's estimate on the budget's count from its start, so calls
starting meanwhile see it (:meth:`aptix.quotas.Quotas.reserve`). The holds are also listed
apart, one entry per call, so that a refusal can tell a budget spent from one that calls in
progress hold and will partly give back when they end. With Redis the list is a sorted set
per org, scored by each entry's deadline: an entry its process never ended (the process
died) goes after :data:`HOLD_SECONDS`, while its tokens stay counted, as spent.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from limits.aio.storage import MemoryStorage

__all__ = ["HOLD_SECONDS", "NO_HOLD", "BudgetHolds", "Hold", "Tally"]

#: How long a hold's entry is listed when its call never ends it (its process died).
HOLD_SECONDS = 900

_NOW = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ms)
"""
#: The calls listed at KEYS[2] and the tokens they hold (each entry ends in ``:<tokens>``).
_HELD = """
local entries = redis.call('ZRANGE', KEYS[2], 0, -1)
local held = 0
for _, entry in ipairs(entries) do
  held = held + tonumber(string.match(entry, '(%d+)$'))
end
"""
#: Holds ARGV[1] tokens on the count KEYS[1] while it is below ARGV[2] (a window of ARGV[3]
#: seconds starts with its first tokens, as the ``limits`` library counts), listing the
#: entry ARGV[4] for ARGV[5] ms; else the count and the holds listed, as they were then.
_TAKE = (
    _NOW
    + """
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
if count < tonumber(ARGV[2]) then
  local tokens = tonumber(ARGV[1])
  if redis.call('INCRBY', KEYS[1], tokens) == tokens then
    redis.call('EXPIRE', KEYS[1], ARGV[3])
  end
  redis.call('ZADD', KEYS[2], ms + tonumber(ARGV[5]), ARGV[4])
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
  return {1, 0, 0, 0}
end
"""
    + _HELD
    + "return {0, count, #entries, held}\n"
)
#: The count KEYS[1] and the holds listed at KEYS[2], at one instant.
_TALLY = _NOW + _HELD + "return {tonumber(redis.call('GET', KEYS[1]) or '0'), #entries, held}\n"


@dataclass(frozen=True, slots=True)
class Hold:
    """Tokens a model call holds on its org's budget until it ends; ``entry`` lists it."""

    tokens: int
    entry: str = ""


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
        self._limits_prefix = limits_prefix
        #: org -> entry -> tokens, without Redis.
        self._listed: dict[str, dict[str, int]] = {}
        if redis is not None:
            self._take_script = redis.register_script(_TAKE)
            self._tally_script = redis.register_script(_TALLY)

    async def take(self, org: str, key: str, tokens: int, limit: int, expiry: int) -> Hold | Tally:
        """Hold ``tokens`` on the count ``key`` while it is below ``limit``, else the tally.

        ``expiry`` is the window's length, which starts with the count's first tokens.
        """
        entry = f"{uuid.uuid4().hex}:{tokens}"
        if self._memory is None:
            keys = [f"{self._limits_prefix}:{key}", f"{self._prefix}:{org}"]
            answer = await self._take_script(
                keys, [tokens, limit, expiry, entry, HOLD_SECONDS * 1000]
            )
            taken, count, calls, held = (int(value) for value in answer)
            return Hold(tokens, entry) if taken else Tally(count, calls, held)
        count = await self._memory.incr(key, expiry, amount=tokens)
        # No await from the count to the list: other calls see both or neither.
        if count - tokens < limit:
            self._listed.setdefault(org, {})[entry] = tokens
            return Hold(tokens, entry)
        tally = self._memory_tally(org, count - tokens)
        await self._memory.decr(key, tokens)  # refused: a hold only for calls that run
        return tally

    async def tally(self, org: str, key: str) -> Tally:
        """The count ``key`` and the org's holds."""
        if self._memory is None:
            keys = [f"{self._limits_prefix}:{key}", f"{self._prefix}:{org}"]
            count, calls, held = (int(value) for value in await self._tally_script(keys, []))
            return Tally(count, calls, held)
        return self._memory_tally(org, await self._memory.get(key))

    async def end(self, org: str, hold: Hold) -> None:
        """Unlist ``hold``: its call ended, and its tokens were settled on the count."""
        if not hold.entry:
            return
        if self._memory is None:
            await self._redis.zrem(f"{self._prefix}:{org}", hold.entry)
            return
        listed = self._listed.get(org, {})
        listed.pop(hold.entry, None)
        if not listed:
            self._listed.pop(org, None)

    def _memory_tally(self, org: str, count: int) -> Tally:
        listed = self._listed.get(org, {})
        return Tally(count, len(listed), sum(listed.values()))
