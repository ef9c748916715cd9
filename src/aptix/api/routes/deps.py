"""Dependencies shared by the routers: the runtime and the caller."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from aptix.api.auth import Caller, caller
from aptix.runtime import Runtime

__all__ = ["CallerDep", "RuntimeDep", "get_runtime"]


async def get_runtime(request: Request) -> Runtime:
    """The runtime the app was started with (async: sync dependencies cost a thread hop)."""
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
CallerDep = Annotated[Caller, Depends(caller)]
