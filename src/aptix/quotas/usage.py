"""``UsageMeter``: model tokens per org, key and UTC day, in Redis or in memory."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from aptix.llm.types import Usage
from aptix.quotas.breaker import RedisBreaker

__all__ = ["UsageMeter"]

#: Days a day's counts are kept in Redis.
_KEEP_SECONDS = 35 * 86_400
_FIELDS = ("promptTokens", "completionTokens", "modelCalls")


def today() -> str:
    """The current UTC day, as ``YYYY-MM-DD``."""
    return datetime.now(UTC).date().isoformat()


class UsageMeter:
    """Counts each model call's tokens under (org, day) by key; shared when Redis is used."""

    def __init__(
        self,
        redis_url: str | None,
        *,
        key_prefix: str = "aptix",
        breaker: RedisBreaker | None = None,
    ) -> None:
        self._prefix = f"{key_prefix}:usage"
        self._breaker = breaker
        self._memory: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
        self._redis: Any = None
        if redis_url is not None:
            import redis.asyncio

            url = redis_url.removeprefix("async+")
            self._redis = redis.asyncio.Redis.from_url(
                url, socket_timeout=2, socket_connect_timeout=2
            )

    async def record(self, org: str, key_id: str, user: str, usage: Usage) -> None:
        """Add one model call of ``key_id`` (belonging to ``user``) to today's counts."""
        counts = {
            "promptTokens": usage.prompt_tokens,
            "completionTokens": usage.completion_tokens,
            "modelCalls": 1,
        }
        # The field names carry the key's user so the day's hash alone lists who spent what.
        who = f"{key_id}|{user}"
        if self._redis is None:
            now = today()
            if (org, now) not in self._memory:
                self._forget_old(now)
            day = self._memory[(org, now)]
            for name, value in counts.items():
                field = f"{who}|{name}"
                day[field] = day.get(field, 0) + value
            return
        if self._breaker is not None and self._breaker.skip():
            return  # Redis is down: the call goes uncounted, as when it fails
        key = f"{self._prefix}:{org}:{today()}"
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for name, value in counts.items():
                    pipe.hincrby(key, f"{who}|{name}", value)
                pipe.expire(key, _KEEP_SECONDS)
                await pipe.execute()
        except Exception as exc:
            if self._breaker is not None:
                self._breaker.failed(exc)
        else:
            if self._breaker is not None:
                self._breaker.answered()

    def _forget_old(self, now: str) -> None:
        """Keep in memory only the days Redis would keep (ISO days compare as text)."""
        oldest = (datetime.fromisoformat(now) - timedelta(seconds=_KEEP_SECONDS)).date()
        for key in [k for k in self._memory if k[1] < oldest.isoformat()]:
            del self._memory[key]

    async def read(self, org: str, day: str) -> dict[str, Any]:
        """The org's counts on ``day``: totals and one row per key, busiest first."""
        if self._redis is None:
            raw = dict(self._memory.get((org, day), {}))
        else:
            stored = await self._redis.hgetall(f"{self._prefix}:{org}:{day}")
            raw = {k.decode(): int(v) for k, v in stored.items()}
        keys: dict[tuple[str, str], dict[str, int]] = {}
        for field, value in raw.items():
            key_id, rest = field.split("|", 1)
            user, name = rest.rsplit("|", 1)
            keys.setdefault((key_id, user), dict.fromkeys(_FIELDS, 0))[name] = int(value)
        rows: list[dict[str, Any]] = [
            {"keyId": key_id, "user": user, **counts, "totalTokens": _total(counts)}
            for (key_id, user), counts in keys.items()
        ]
        rows.sort(key=lambda row: (-row["totalTokens"], row["keyId"]))
        totals = {name: sum(row[name] for row in rows) for name in _FIELDS}
        return {**totals, "totalTokens": _total(totals), "keys": rows}

    async def aclose(self) -> None:
        """Close the Redis connection pool."""
        if self._redis is not None:
            await self._redis.aclose()


def _total(counts: dict[str, int]) -> int:
    return counts["promptTokens"] + counts["completionTokens"]
