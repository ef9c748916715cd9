"""``RedisBreaker``: once Redis stops answering, the limits skip it for a short cool-off."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["COOL_OFF_SECONDS", "RedisBreaker"]

_log = logging.getLogger("aptix.quotas")

#: How long after Redis failed to answer the limits do without it. A Redis that hangs makes
#: each call wait out its 2 s socket timeout; without the cool-off a turn, which counts
#: several times, waited about 12 s for as long as the outage lasted.
COOL_OFF_SECONDS = 5.0


class RedisBreaker:
    """Whether to reach Redis now: not during the cool-off after a failure (a circuit breaker).

    After the cool-off one caller tries Redis again while the others keep skipping it; its
    success ends the outage, its failure starts a new cool-off. The outage is logged when it
    starts and when it ends, once each.
    """

    def __init__(self, *, fail_open: bool, clock: Callable[[], float] = time.monotonic) -> None:
        self._fail_open = fail_open
        self._clock = clock
        self._retry_at: float | None = None

    @property
    def down(self) -> bool:
        """True from a failure until Redis answers again."""
        return self._retry_at is not None

    def skip(self) -> bool:
        """True while the cool-off runs: act as if Redis failed, without waiting for it."""
        if self._retry_at is None:
            return False
        now = self._clock()
        if now < self._retry_at:
            return True
        self._retry_at = now + COOL_OFF_SECONDS  # this caller tries; the others still skip
        return False

    def failed(self, exc: BaseException) -> None:
        """Redis did not answer: start a cool-off, and log the outage if it starts now."""
        if self._retry_at is None:
            what = "allowing requests" if self._fail_open else "refusing requests with 503"
            _log.error(
                "[Quotas_Redis__Unavailable] limits cannot reach Redis (%s); %s until it "
                "answers (tried again every %g s)",
                type(exc).__name__,
                what,
                COOL_OFF_SECONDS,
            )
        self._retry_at = self._clock() + COOL_OFF_SECONDS

    def answered(self) -> None:
        """Redis answered: the outage, if any, is over."""
        if self._retry_at is not None:
            self._retry_at = None
            _log.warning("[Quotas_Redis__Recovered] limits reach Redis again")
