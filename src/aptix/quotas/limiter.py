"""``Quotas``: requests per key, concurrent turns and model tokens per org (DESIGN.md §15).

Requests and tokens are counted by the ``limits`` library (fixed windows); running turns are
one entry each, with a deadline of their own. The storage is Redis when ``APTIX_REDIS_URL`` is
set, so every process shares the counts, and memory otherwise. A Redis that stops answering
is logged once and the limits then fail open (allow) or closed (refuse with 503), as
``APTIX_LIMITS_WHEN_REDIS_DOWN`` says; a request never fails with a 500 for it. During the
cool-off after a failure (:mod:`aptix.quotas.breaker`) they do so without asking Redis, but
for ending what a turn or a model call took on Redis before: its slot, its hold.

Whatever took a slot or a hold ends it: a caller cancelled while Redis ran the take gives it
back at once (shielded), one whose take or give-back Redis did not answer leaves it to the
next call that reaches Redis, and a give-back that comes first keeps the take from taking
(:mod:`aptix.quotas.entries`).
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

from limits import RateLimitItem, parse
from limits.aio.storage import MemoryStorage, RedisStorage, Storage
from limits.aio.strategies import FixedWindowRateLimiter

from aptix.errors import ConfigurationError
from aptix.llm.types import Usage
from aptix.log_setup import escape_controls
from aptix.quotas.breaker import RedisBreaker
from aptix.quotas.holds import NO_HOLD, BudgetHolds, Hold, Tally
from aptix.quotas.refusal import Refusal
from aptix.quotas.slots import TurnSlots, renew_every
from aptix.quotas.usage import UsageMeter

__all__ = ["Quotas", "Refusal"]

_T = TypeVar("_T")
#: Ends what a turn or a model call took on Redis (its slot, its hold), once called.
Ending = Callable[[], Awaitable[None]]
#: How long a caller refused because Redis is down is told to wait.
_OUTAGE_RETRY_SECONDS = 5
#: How long a caller refused because calls in progress hold the budget is told to wait: the
#: holds end with their calls, seconds away, not with the window.
_HELD_RETRY_SECONDS = 5
#: How long closing waits for a slot renewal under way to end.
_CLOSE_SECONDS = 5


class Quotas:
    """Every limit of a deployment; each is off unless its setting is given."""

    def __init__(
        self,
        *,
        rate_limit: str | None = None,
        max_concurrent_turns: int | None = None,
        token_budget: str | None = None,
        redis_url: str | None = None,
        key_prefix: str = "aptix",
        fail_open: bool = True,
    ) -> None:
        self.rate_limit = rate_limit
        self.max_concurrent_turns = max_concurrent_turns
        self.token_budget = token_budget
        self.shared = redis_url is not None
        #: Refusals this process gave, by code (``rate_limited``, ``limits_unavailable``...).
        self.refused: Counter[str] = Counter()
        self._fail_open = fail_open
        self._breaker = RedisBreaker(fail_open=fail_open)
        self._rate: RateLimitItem | None = parse(rate_limit) if rate_limit else None
        self._budget: RateLimitItem | None = parse(token_budget) if token_budget else None
        self._storage: Storage
        self._memory: MemoryStorage | None = None
        self._redis: Any = None
        self._limits_prefix = f"{key_prefix}:limits"
        #: org -> the slots this process took and has not given back, oldest first.
        self._held: dict[str, deque[str | None]] = {}
        #: Slots and holds whose ends Redis did not answer (nor, maybe, their takes), ended by
        #: the next call that reaches Redis: Redis may yet apply what it was sent.
        self._unsettled: list[Ending] = []
        #: Pushes back the deadlines of the slots in ``_held`` while any are (in one loop).
        self._renewing: asyncio.Task[None] | None = None
        if redis_url is not None:
            try:
                import redis.asyncio
            except ImportError:
                raise ConfigurationError(
                    "APTIX_REDIS_URL needs the Redis client, which is not installed.",
                    hint="pip install 'aptix[redis]', or unset APTIX_REDIS_URL",
                ) from None

            self._redis = redis.asyncio.Redis.from_url(
                redis_url.removeprefix("async+"), socket_timeout=2, socket_connect_timeout=2
            )
            # The same connections (and their 2 s timeouts), so aclose() closes them all; the
            # URL only tells ``limits`` which client to use (``async+unix`` reads as valkey).
            url = redis_url.removeprefix("async+")
            scheme = "async+redis+" if url.startswith("unix:") else "async+"
            self._storage = RedisStorage(
                scheme + url,
                implementation="redispy",
                key_prefix=self._limits_prefix,
                connection_pool=self._redis.connection_pool,
            )
        else:
            self._storage = self._memory = MemoryStorage()
        self._limiter = FixedWindowRateLimiter(self._storage)
        self._slots = TurnSlots(redis=self._redis, prefix=key_prefix)
        self._holds = BudgetHolds(
            redis=self._redis,
            memory=self._memory,
            prefix=key_prefix,
            limits_prefix=self._limits_prefix,
        )
        self.usage = UsageMeter(redis_url, key_prefix=key_prefix, breaker=self._breaker)

    @property
    def redis_up(self) -> bool | None:
        """Whether Redis answered the last call the limits made to it; None without Redis.

        False from a failure until a call succeeds again: meanwhile the limits let requests
        through unlimited (``open``) or refuse them (``closed``), and usage goes uncounted.
        """
        return None if self._redis is None else not self._breaker.down

    async def request(self, key_id: str) -> Refusal | None:
        """Count one request of the key ``key_id``; a refusal once its rate is spent."""
        item = self._rate
        if item is None:
            return None
        if self._breaker.skip():
            return self._unavailable()
        try:
            allowed = await self._limiter.hit(item, "key", key_id)
            if allowed:
                self._up()
                return None
            stats = await self._limiter.get_window_stats(item, "key", key_id)
        except Exception as exc:
            return self._failed(exc)
        self._up()
        wait = _seconds_until(stats.reset_time)
        self.refused["rate_limited"] += 1
        return Refusal(
            message=f"Rate limit reached: this API key may make {self.rate_limit} requests; "
            f"retry in {wait} s.",
            code="rate_limited",
            reset_seconds=wait,
            policy="requests",
            quota=item.amount,
            remaining=stats.remaining,
            window_seconds=item.get_expiry(),
        )

    async def enter_turn(self, org: str) -> Refusal | None:
        """Take one of the org's turn slots (and check its token budget) before a turn."""
        refusal = await self.tokens(org)
        if refusal is not None or self.max_concurrent_turns is None:
            return refusal
        limit = self.max_concurrent_turns
        slot = uuid.uuid4().hex  # named before it is asked for: a take cut short gives it back
        give_back = partial(self._slots.give_back, org, slot)
        taken: bool | None = None
        failed = False
        try:
            if not self._breaker.skip():
                await self._settle_unsettled()
                taken = await self._taken(self._slots.take(org, slot, limit), give_back)
        except Exception as exc:
            refusal = self._failed(exc)
            failed = True
        else:
            refusal = self._unavailable() if taken is None else None
        if taken is None:
            # A request that timed out may still reach Redis once it answers again: the slot
            # is given back when the turn ends, or, for a turn refused, by the next call.
            if refusal is None:
                self._held.setdefault(org, deque()).append(slot if failed else None)
            elif failed:
                self._unsettled.append(give_back)
            return refusal
        self._up()
        if taken:
            self._held.setdefault(org, deque()).append(slot)
            self._keep_renewing()
            return None
        self.refused["too_many_turns"] += 1
        return Refusal(
            message=f"This organization already runs {limit} turns at once, as many as it may; "
            "retry when one ends.",
            code="too_many_turns",
            reset_seconds=1,
            policy="turns",
            quota=limit,
            unit="concurrent-requests",
        )

    async def leave_turn(self, org: str) -> None:
        """Give back a slot :meth:`enter_turn` took for ``org`` in this process."""
        held = self._held.get(org)
        if not held:
            return
        # The oldest: the slots left are the newest, so none ends before a running turn's.
        slot = held.popleft()
        if not held:
            del self._held[org]
            if not self._held and self._renewing is not None:
                # Nothing left to renew: no task outlives the turns. Forgotten at once, so a
                # turn entering before the task has ended starts a new one.
                self._renewing.cancel()
                self._renewing = None
        if slot is not None:
            # Shielded: popped, the slot is this call's alone to give back; cut short, it
            # would stay counted until its deadline (a turn's dependency cancelled as it ends).
            await asyncio.shield(self._end(partial(self._slots.give_back, org, slot)))

    def _keep_renewing(self) -> None:
        """Renew this process's slots from now on, unless that runs already in this loop."""
        task, loop = self._renewing, asyncio.get_running_loop()
        if task is None or task.done() or task.get_loop() is not loop:
            self._renewing = loop.create_task(self._renew(), name="aptix-turn-slots")

    async def _renew(self) -> None:
        """Push back the deadlines of the slots this process holds, while it holds any.

        A slot's deadline is a minute (:data:`~aptix.quotas.slots.SLOT_SECONDS`), so one a dead
        process left frees itself soon; a turn running longer keeps its slot. One Redis does
        not answer is tried at the next renewal; past its deadline it is gone until it ends.
        """
        while self._held:
            await asyncio.sleep(renew_every())
            for org, held in list(self._held.items()):
                if taken := [slot for slot in held if slot is not None]:
                    try:
                        await self._slots.renew(org, taken)
                    except Exception as exc:
                        self._breaker.failed(exc)
                    else:
                        self._up()  # Redis answers again: shown so, as after any call
                    if _cancel_swallowed():
                        # The task would run on, and aclose() wait for it for ever.
                        return

    async def tokens(self, org: str) -> Refusal | None:
        """A refusal when the org's model token budget is used up, or held (:meth:`reserve`)."""
        item = self._budget
        if item is None:
            return None
        if self._breaker.skip():
            return self._unavailable()
        try:
            await self._settle_unsettled()
            tally = await self._holds.tally(org, item.key_for("tokens", org))
            if tally.count < item.amount:
                self._up()
                return None
            stats = await self._limiter.get_window_stats(item, "tokens", org)
        except Exception as exc:
            return self._failed(exc)
        self._up()
        return self._budget_refusal(item, tally, stats.reset_time)

    async def reserve(self, org: str, tokens: int) -> Refusal | Hold:
        """Hold ``tokens`` of the org's budget for a model call about to start.

        The call goes while some of the budget is left, as :meth:`tokens` says, but its hold
        is counted at once, so calls starting meanwhile see it: concurrent turns no longer
        all pass a budget that only their ends would have spent. :meth:`spend` settles the
        hold to what the call used, :meth:`release` gives it back. The hold (of no tokens
        when none is taken: no budget, or Redis is down and the limits are open), or a
        refusal: the budget is spent, or calls in progress hold what is left of it.
        """
        item = self._budget
        if item is None:
            return NO_HOLD
        if self._breaker.skip():
            return self._unavailable() or NO_HOLD
        key = item.key_for("tokens", org)
        hold = Hold.of(max(1, tokens))
        give_back = partial(self._holds.settle, org, key, hold, -hold.tokens)
        taken: Hold | Tally | None = None
        try:
            await self._settle_unsettled()
            take = self._holds.take(org, key, hold, item.amount, item.get_expiry())
            taken = await self._taken(take, give_back)
            if isinstance(taken, Hold):
                self._up()
                return taken
            stats = await self._limiter.get_window_stats(item, "tokens", org)
        except Exception as exc:
            if taken is None:
                # No answer is not no take (Redis may run it after the socket timeout): the
                # next call that reaches Redis gives it back, as a hold ended in an outage.
                self._unsettled.append(give_back)
            return self._failed(exc) or NO_HOLD
        self._up()
        return self._budget_refusal(item, taken, stats.reset_time)

    async def spend(
        self, org: str, key_id: str, user: str, usage: Usage, *, held: Hold = NO_HOLD
    ) -> None:
        """Record one model call's tokens against the org's budget and in the usage meter.

        ``held`` is what :meth:`reserve` held for the call: only the difference is counted
        (given back when the call used less), and the hold ends. That is in the window the
        hold was taken in: once it has ended, the count holds other calls' tokens, and the
        call stays counted at its hold, in the window it started in.
        """
        item = self._budget
        change = usage.total_tokens - held.tokens
        if item is not None and held.entry:
            await self._settle(org, item.key_for("tokens", org), held, change)
        elif item is not None and change > 0 and not self._breaker.skip():
            try:
                key = item.key_for("tokens", org)
                await self._holds.charge(org, key, change, item.get_expiry())
            except Exception as exc:
                self._breaker.failed(exc)
            else:
                self._up()
        await self.usage.record(org, key_id, user, usage)

    async def release(self, org: str, held: Hold) -> None:
        """Give back a hold of a model call that used nothing (it ended before any answer)."""
        item = self._budget
        if item is not None and held.entry:
            await self._settle(org, item.key_for("tokens", org), held, -held.tokens)

    async def _settle(self, org: str, key: str, held: Hold, change: int) -> None:
        """End ``held``, changing the count ``key`` by ``change``; kept if Redis does not answer."""
        await self._end(partial(self._holds.settle, org, key, held, change))

    async def _taken(self, take: Awaitable[_T], ending: Ending) -> _T:
        """The answer to ``take``; cancelled before it comes, ``ending`` ends what it took.

        Redis may have run the take before the cancel came out of the await (a client that
        hangs up as its turn or model call begins): what it took is given back at once, as a
        caller cancelled later gives it back, or it counts until its deadline. A cancel the
        Redis client swallowed counts as one: under Python 3.11 its ``asyncio.wait_for`` drops
        a cancel that comes as the call ends (CPython gh-86296), and the turn or model call
        would start all the same.
        """
        try:
            taken = await take
        except asyncio.CancelledError:
            await asyncio.shield(self._end(ending))
            raise
        if _cancel_swallowed():
            await asyncio.shield(self._end(ending))
            raise asyncio.CancelledError
        return taken

    async def _end(self, ending: Ending) -> None:
        """End a slot or a hold now, or, if Redis does not answer, at the next call that does."""
        # Tried even during a cool-off: left on Redis, a slot counts as a running turn and a
        # hold its whole estimate as a call in progress, for 15 minutes.
        try:
            await self._settle_unsettled()
            await ending()
        except Exception as exc:
            self._unsettled.append(ending)
            self._breaker.failed(exc)
        else:
            self._up()

    async def _settle_unsettled(self) -> None:
        """End the slots and holds whose ends Redis did not answer, oldest first."""
        # Ending again one that Redis did end changes nothing: its set no longer lists it (a
        # hold: nor its window), and marked ended, it is not taken again. Each is taken off
        # the list before Redis is asked, so calls ending together end different ones (none
        # twice while another is dropped), and put back if Redis fails.
        while self._unsettled:
            ending = self._unsettled.pop(0)
            try:
                await ending()
            except BaseException:
                self._unsettled.insert(0, ending)
                raise

    def _budget_refusal(self, item: RateLimitItem, tally: Tally, reset_time: float) -> Refusal:
        """Why a model call may not start: the budget is spent, or held by calls in progress.

        Held, the same code, but the wait is seconds: the holds end with their calls.
        """
        wait = _seconds_until(reset_time)
        self.refused["token_budget_exhausted"] += 1
        if tally.calls and tally.spent < item.amount:
            calls = "1 model call" if tally.calls == 1 else f"{tally.calls} model calls"
            wait = min(wait, _HELD_RETRY_SECONDS)
            message = (
                f"Token budget held by {calls} in progress: this organization has used "
                f"{tally.spent} of its {self.token_budget} model tokens, and the calls running "
                f"hold the rest until they end; retry in {wait} s."
            )
            remaining = 0
        else:
            message = (
                f"Token budget reached: this organization may use {self.token_budget} "
                f"model tokens; the budget renews in {wait} s."
            )
            remaining = max(0, item.amount - tally.count)
        return Refusal(
            message=message,
            code="token_budget_exhausted",
            reset_seconds=wait,
            policy="tokens",
            quota=item.amount,
            remaining=remaining,
            window_seconds=item.get_expiry(),
        )

    async def budget_state(self, org: str) -> dict[str, Any] | None:
        """The org's budget: limit, remaining and seconds until it renews (None when off).

        Before the first use no window exists (a window starts at the first use and then
        lasts its full length), so the full length is shown, never "1 s" for a window that
        does not exist.
        """
        item = self._budget
        if item is None:
            return None
        unknown = {"limit": self.token_budget, "remaining": None, "resetSeconds": None}
        if self._breaker.skip():
            return unknown
        try:
            await self._settle_unsettled()
            stats = await self._limiter.get_window_stats(item, "tokens", org)
        except Exception as exc:
            self._breaker.failed(exc)
            return unknown
        self._up()
        # No window: the library reports one ending now, and the budget is whole.
        started = stats.reset_time > time.time() or stats.remaining < item.amount
        return {
            "limit": self.token_budget,
            "remaining": stats.remaining,
            "resetSeconds": _seconds_until(stats.reset_time) if started else item.get_expiry(),
        }

    async def check(self) -> None:
        """At start-up, a :class:`ConfigurationError` when Redis refuses what the URL asks.

        A Redis that answers but refuses the URL's database (or its credentials) never will
        work, nor a URL whose options the client cannot use (it fails before connecting, the
        same way every time). One that does not answer is an outage, as when it stops answering
        later: logged once and shown as down, then met by ``APTIX_LIMITS_WHEN_REDIS_DOWN``.
        """
        if self._redis is None:
            return
        from redis.exceptions import AuthenticationError, ResponseError

        try:
            await self._redis.ping()
        except (ResponseError, AuthenticationError) as exc:
            await self.aclose()
            reason = escape_controls(str(exc)[:200])  # the server's words: outside text
            raise ConfigurationError(
                f"APTIX_REDIS_URL: Redis refuses the connection ({reason}).",
                hint="fix the database number (0-15 on a default Redis) or the credentials "
                "in the URL",
            ) from None
        except (TypeError, ValueError) as exc:
            await self.aclose()
            raise ConfigurationError(
                f"APTIX_REDIS_URL: the Redis client cannot use the URL ({type(exc).__name__}).",
                hint="remove the query options the client does not take",
            ) from None
        except Exception as exc:
            # Not answering: an outage, shown and logged from now on as it is later on (an
            # idle process would otherwise look healthy); the cool-off retries it as usual.
            self._breaker.failed(exc)

    async def aclose(self) -> None:
        """Stop renewing slots and close the Redis connections."""
        task, self._renewing = self._renewing, None
        if task is not None and not task.done():
            task.cancel()
            if task.get_loop() is asyncio.get_running_loop():
                # Bounded: a renewal under way ends with its Redis call (2 s at most); a task
                # of another loop (ended, or in another thread) is not this loop's to wait for.
                await asyncio.wait({task}, timeout=_CLOSE_SECONDS)
        await self.usage.aclose()
        if self._redis is not None:
            await self._redis.aclose()

    def _failed(self, exc: Exception) -> Refusal | None:
        """Redis did not answer: log once per outage, then allow or refuse as configured.

        For a caller waiting on the answer; what refuses no one (ending a call or a turn,
        reading the budget) tells the breaker alone, so ``refused`` counts refusals given.
        """
        self._breaker.failed(exc)
        return self._unavailable()

    def _unavailable(self) -> Refusal | None:
        """What a request gets while Redis is down: nothing (open) or a 503 (closed)."""
        if self._fail_open:
            return None
        self.refused["limits_unavailable"] += 1
        return Refusal(
            message="Limits cannot be checked right now (their store is unreachable); "
            "retry shortly.",
            code="limits_unavailable",
            reset_seconds=_OUTAGE_RETRY_SECONDS,
            status=503,
        )

    def _up(self) -> None:
        self._breaker.answered()


def _cancel_swallowed() -> bool:
    """Whether this task was cancelled during an await that returned all the same.

    The Redis client, under Python 3.11, awaits through ``asyncio.wait_for``, which drops a
    cancel that comes as the call it waits for ends (CPython gh-86296; half the cancels of a
    command in flight, measured): the task reads ``cancelling()`` yet runs on.
    """
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _seconds_until(epoch: float) -> int:
    return max(1, math.ceil(epoch - time.time()))
