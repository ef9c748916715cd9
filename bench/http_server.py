"""The API with a zero-latency in-process model, served by uvicorn (used by bench.http).

Run: ``python -m bench.http_server PORT [floor]``; ``floor`` serves a bare FastAPI route
instead, the framework's own cost. It measures nothing itself, so it states no target.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from aptix.api import create_app
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, reply


def _answer(request: LlmRequest) -> LlmResponse:
    return reply("ok")


class _Body(BaseModel):
    arguments: dict[str, str]


def _floor_app() -> FastAPI:
    """A bare FastAPI app with one POST route: the framework's own cost, for comparison."""
    floor = FastAPI()

    @floor.post("/v1/tools/{name}/invoke")
    async def invoke(name: str, body: _Body) -> JSONResponse:
        return JSONResponse({"successful": True, "result": {"message": name}, "errors": []})

    return floor


def main(argv: Sequence[str] | None = None) -> None:
    """Serve until stopped."""
    parser = argparse.ArgumentParser(prog="python -m bench.http_server", description=__doc__)
    parser.add_argument("port", type=int, help="the port on 127.0.0.1")
    parser.add_argument("floor", nargs="?", choices=["floor"], help="serve the bare FastAPI floor")
    args = parser.parse_args(argv)
    if args.floor:
        app = _floor_app()
    else:
        app = create_app(AptixSettings(semantic_matching=False), model=FunctionModel(_answer))
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
