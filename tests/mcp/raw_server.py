"""A raw stdio MCP server (no SDK) whose ``tools/call`` answers are wrong in the ways asked for.

``nullresult`` answers ``"result": null``, ``garbageline`` a line that is not JSON (and no
answer), ``bigerror`` a JSON-RPC error with a 3,000,000-character message, ``bigiserror`` an
``isError`` result of as many characters; any other tool answers ``fine``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOOLS = ["nullresult", "garbageline", "bigerror", "bigiserror", "fine"]
BIG = 3_000_000


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request_id: object, name: str) -> None:
    if name == "nullresult":
        send({"jsonrpc": "2.0", "id": request_id, "result": None})
    elif name == "garbageline":
        sys.stdout.write("this is not json <b>\n")
        sys.stdout.flush()
    elif name == "bigerror":
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32000, "message": "E" * BIG}})
    elif name == "bigiserror":
        text = {"type": "text", "text": "F" * BIG}
        send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [text], "isError": True}})
    else:
        text = {"type": "text", "text": "fine"}
        send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [text]}})


for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw", "version": "1"},
        }
        send({"jsonrpc": "2.0", "id": request_id, "result": result})
    elif method == "tools/list":
        schema = {"type": "object", "properties": {}}
        listed = [{"name": t, "description": t, "inputSchema": schema} for t in TOOLS]
        send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": listed}})
    elif method == "tools/call":
        answer(request_id, message["params"]["name"])
    elif request_id is not None:
        send({"jsonrpc": "2.0", "id": request_id, "result": {}})
