"""A raw stdio MCP server (no SDK): it lists the tools it is given and nests answers as asked.

``listed.py TOOLS [LOG]``: ``tools/list`` answers with the JSON text in the file ``TOOLS`` as
its ``tools`` (written as it is, however deep). ``tools/call`` of ``deep`` answers a
``structuredContent`` nested ``arguments.depth`` levels deep, ``deepnote`` first sends a
notification nested as deep, then answers; every call appends ``ran <name>`` to ``LOG``.
"""

from __future__ import annotations

import json
import sys

TOOLS = open(sys.argv[1], encoding="utf-8").read()  # noqa: SIM115  # read once, at start
LOG = sys.argv[2] if len(sys.argv) > 2 else None


def send(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def nested(depth: int) -> str:
    return "[" * depth + '"leaf"' + "]" * depth  # as text: json.dumps recurses


for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), json.dumps(message.get("id"))
    if method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "listed", "version": "1"},
        }
        send(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}))
    elif method == "tools/list":
        send(f'{{"jsonrpc": "2.0", "id": {request_id}, "result": {{"tools": {TOOLS}}}}}')
    elif method == "tools/call":
        name, arguments = message["params"]["name"], message["params"].get("arguments") or {}
        if LOG:
            with open(LOG, "a", encoding="utf-8") as log:
                log.write(f"ran {name}\n")
        depth = int(arguments.get("depth", 1))
        if name == "deepnote":
            note = f'{{"level": "info", "data": {nested(depth)}}}'
            send(f'{{"jsonrpc": "2.0", "method": "notifications/message", "params": {note}}}')
        structured = f'{{"v": {nested(depth)}}}' if name == "deep" else "{}"
        result = (
            f'{{"content": [{{"type": "text", "text": "ok"}}], "structuredContent": {structured}}}'
        )
        send(f'{{"jsonrpc": "2.0", "id": {request_id}, "result": {result}}}')
    elif "id" in message:
        send(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {}}))
