"""``python -m aptix.testing.server``: the scripted server from a shell."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from aptix.testing.server import Fail, ScriptedOpenAIServer
from aptix.testing.server_cli import read_script


def test_the_scripted_server_runs_from_the_command_line(tmp_path: Path) -> None:
    script = tmp_path / "steps.json"
    script.write_text(
        json.dumps([{"text": "Let me add.", "calls": [{"name": "add", "arguments": {"a": 1}}]}])
    )
    command = ["-m", "aptix.testing.server", "--port", "0", "--reply", "Hello."]
    server = subprocess.Popen(
        [sys.executable, *command, "--script", str(script)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        found = re.search(r"on (http://127\.0\.0\.1:\d+/v1) ", line)
        assert found, line
        client = openai.OpenAI(base_url=found.group(1), api_key="unused", max_retries=0)

        def ask(text: str) -> openai.types.chat.ChatCompletionMessage:
            answer = client.chat.completions.create(
                model="scripted", messages=[{"role": "user", "content": text}]
            )
            return answer.choices[0].message

        assert ask("hi").content == "Hello."
        called = ask("add")
        assert called.content == "Let me add."
        assert called.tool_calls is not None
        assert called.tool_calls[0].function.name == "add"  # type: ignore[union-attr]
        assert ask("and now?").content == "(scripted server) You said: and now?"
    finally:
        server.terminate()
        server.communicate(timeout=10)  # also closes the pipe


def test_a_malformed_script_step_is_named(tmp_path: Path) -> None:
    script = tmp_path / "steps.json"
    script.write_text(json.dumps([{"fail": 503}, {"texte": "typo"}]))
    with pytest.raises(ValueError, match=r"steps\.json: step 2 needs 'text', 'calls' or 'fail'"):
        read_script(script)
    script.write_text(json.dumps([{"fail": 503, "message": "down"}]))
    assert read_script(script) == [Fail(503, "down")]


def test_a_client_hanging_up_prints_no_traceback_and_a_real_failure_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with ScriptedOpenAIServer() as scripted:
        server = scripted._server
        assert server is not None
        for raised in (BrokenPipeError(32, "Broken pipe"), ValueError("a real failure")):
            try:
                raise raised
            except Exception:
                server.handle_error(None, ("127.0.0.1", 1))
    printed = capsys.readouterr().err
    assert "BrokenPipeError" not in printed
    assert "ValueError: a real failure" in printed
