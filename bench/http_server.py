"""The API with a zero-latency in-process model, served by uvicorn (used by bench.http)."""

from __future__ import annotations

import sys

import uvicorn

from aptix.api import create_app
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, reply


def _answer(request: LlmRequest) -> LlmResponse:
    return reply("ok")


if __name__ == "__main__":
    port = int(sys.argv[1])
    app = create_app(AptixSettings(semantic_matching=False), model=FunctionModel(_answer))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
