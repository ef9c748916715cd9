"""Dependencies shared by the routers: the runtime and the caller."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request

from aptix.api.auth import Caller, caller, refused
from aptix.quotas import PAYER, Payer
from aptix.runtime import Runtime

__all__ = [
    "CallerDep",
    "RuntimeDep",
    "TurnSlotDep",
    "get_runtime",
    "paying_caller",
    "turn_slot",
]


async def get_runtime(request: Request) -> Runtime:
    """The runtime the app was started with (async: sync dependencies cost a thread hop)."""
    runtime: Runtime = request.app.state.runtime
    return runtime


async def paying_caller(who: Annotated[Caller, Depends(caller)]) -> Caller:
    """The authenticated caller, who pays for the request's model calls.

    Every route takes its caller here, so a model call made outside a turn (the workflow match
    arbiter of ``/v1/workflows/match`` or of ``match_workflow`` through ``/v1/tools``) is
    checked against the org's token budget and counted to the key, as a turn's calls are.
    """
    PAYER.set(Payer(who.org, who.key_id, who.user))
    return who


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
CallerDep = Annotated[Caller, Depends(paying_caller)]


async def turn_slot(runtime: RuntimeDep, who: CallerDep) -> AsyncIterator[None]:
    """Hold one of the org's turn slots until the answer is sent (a stream to its end).

    429 when the org runs ``APTIX_MAX_CONCURRENT_TURNS`` turns or its token budget is spent.
    The turn's model calls are metered to the caller's org and key (:func:`paying_caller`).
    """
    quotas = runtime.quotas
    refusal = await quotas.enter_turn(who.org)
    if refusal is not None:
        raise refused(refusal)
    try:
        yield
    finally:
        await quotas.leave_turn(who.org)


#: A route that runs turns takes this; the slot is given back after the response is sent.
TurnSlotDep = Annotated[None, Depends(turn_slot, scope="request")]
