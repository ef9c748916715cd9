"""``python -m aptix.testing.server``: the scripted OpenAI-compatible server from a shell.

It answers from ``--reply`` texts and a ``--script`` JSON file in order, then echoes each
last user message (of a Chat Completions ``messages`` or a Responses ``input``), so ``aptix
serve``, ``aptix chat`` or any OpenAI client can be tried against a model whose answers are
known in advance::

    python -m aptix.testing.server --port 8900 --reply "Hello." --script steps.json

A script file is a JSON list; each step is ``{"text": "..."}``, ``{"calls": [{"name": "...",
"arguments": {...}}]}`` (text and calls may be combined) or ``{"fail": 503, "message": "..."}``.
"""

from __future__ import annotations

import argparse
import json
import threading
from pathlib import Path
from typing import Any

from aptix.testing.models import call, reply
from aptix.testing.server import Fail, ScriptedOpenAIServer, Step

__all__ = ["main", "read_script"]


def read_script(path: Path) -> list[Step]:
    """The steps of a JSON script file; ValueError naming the step that is malformed."""
    steps = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(steps, list):
        raise ValueError(f"{path}: a script is a JSON list of steps")
    return [_step(step, f"{path}: step {n}") for n, step in enumerate(steps, 1)]


def _step(step: Any, where: str) -> Step:
    if not isinstance(step, dict) or not ({"text", "calls", "fail"} & step.keys()):
        raise ValueError(f"{where} needs 'text', 'calls' or 'fail'")
    if "fail" in step:
        return Fail(int(step["fail"]), str(step.get("message", "scripted failure")))
    calls = [call(str(c["name"]), c.get("arguments") or {}) for c in step.get("calls") or ()]
    return reply(step.get("text"), *calls)


def _echo(body: dict[str, Any]) -> Step:
    # Chat Completions sends ``messages``; the Responses API sends ``input``: a string, or
    # items whose user messages hold a string or ``input_text`` parts.
    said = body.get("input") if "messages" not in body else None
    if not isinstance(said, str):
        items = body.get("messages") or said or ()
        users = [m for m in items if isinstance(m, dict) and m.get("role") == "user"]
        said = _said(users[-1].get("content") if users else None)
    return reply(f"(scripted server) You said: {said}")


def _said(content: Any) -> str:
    """A message's content as text: its text parts joined, else the content as JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            p["text"]
            for p in content
            if isinstance(p, dict)
            and p.get("type") in ("text", "input_text")
            and isinstance(p.get("text"), str)
        ]
        if texts:
            return "".join(texts)
    return json.dumps(content)


def main(argv: list[str] | None = None) -> None:
    """Run the server until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="python -m aptix.testing.server",
        description="A scripted OpenAI-compatible server (Chat Completions and Responses).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8900, help="port (8900; 0 picks one)")
    parser.add_argument("--reply", action="append", default=[], help="a text answer, in order")
    parser.add_argument("--script", type=Path, help="a JSON file of steps, after the replies")
    parser.add_argument("--api-key", help="answer 401 unless this bearer key is sent")
    args = parser.parse_args(argv)
    try:
        script: list[Step] = [reply(text) for text in args.reply]
        if args.script is not None:
            script += read_script(args.script)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        parser.error(f"cannot read the script: {exc}")
    server = ScriptedOpenAIServer(
        script, respond=_echo, api_key=args.api_key, host=args.host, port=args.port
    )
    try:
        server.start()
    except OSError as exc:
        parser.error(f"cannot listen on {args.host}:{args.port}: {exc}")
    print(f"Scripted OpenAI-compatible server on {server.base_url} (Ctrl-C stops).", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
