"""Entries taken on Redis by a caller that may stop waiting: a turn's slot, a model call's hold.

Each entry is a member of a sorted set scored by its deadline, so one its process never ended
(the process died) goes by itself. The caller names it before asking for it, so a caller that
gets no answer (cancelled, or timed out while Redis had the script) can still end it, whether
or not Redis ran the take. Ending an entry the set does not list marks it ended, in a second
set, for as long as an entry lasts, so a take that arrives after its own end (sent on a
connection that was then cut) takes nothing.

The functions here write that part of the scripts (Lua) that take and end entries, given the
``KEYS[i]`` and ``ARGV[i]`` each script passes.
"""

from __future__ import annotations

__all__ = ["clock", "end", "unless_ended"]


def clock(*sets: str) -> str:
    """Lua: ``ms``, Redis's clock in milliseconds; ``sets`` lose their entries past deadline."""
    lines = [
        "local now = redis.call('TIME')",
        "local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)",
        *(f"redis.call('ZREMRANGEBYSCORE', {key}, '-inf', ms)" for key in sets),
    ]
    return "\n".join(lines) + "\n"


def unless_ended(ended: str, entry: str, answer: str) -> str:
    """Lua: returns ``answer`` (taken) for an ``entry`` already ended: its caller has gone."""
    return f"if redis.call('ZSCORE', {ended}, {entry}) then\n  return {answer}\nend\n"


def end(listed: str, ended: str, entry: str, lasts: str) -> str:
    """Lua: unlists ``entry``; one not listed (its take to come) is marked ended ``lasts`` ms."""
    return f"""if redis.call('ZREM', {listed}, {entry}) == 0 then
  local now = redis.call('TIME')
  local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  redis.call('ZADD', {ended}, ms + tonumber({lasts}), {entry})
  redis.call('PEXPIRE', {ended}, {lasts})
end
"""
