"""``aptix chat`` driven end to end in a pty against the scripted OpenAI-compatible server."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect

from aptix.testing import call, reply
from aptix.testing.server import ScriptedOpenAIServer


def test_chat_runs_a_tool_asks_for_approval_and_finishes(tmp_path: Path) -> None:
    script = [
        reply(None, call("agent_calculator", {"expression": "19.99*3"}, id="c1")),
        reply(
            "That is 59.97.",
            call("request_user_approval", {"prompt": "Charge 59.97?"}, id="a1"),
        ),
        reply("Charged."),
    ]
    with ScriptedOpenAIServer(script) as server:
        env = {
            **os.environ,
            "APTIX_DATA_DIR": str(tmp_path),
            "APTIX_LLM_BASE_URL": server.base_url,
            "APTIX_LLM_MODEL": "scripted",
            "APTIX_LLM_MAX_RETRIES": "0",
            "APTIX_SEMANTIC_MATCHING": "false",
            "COLUMNS": "200",
            "TERM": "dumb",
            "NO_COLOR": "1",
        }
        child = pexpect.spawn(
            sys.executable, ["-m", "aptix", "chat"], env=env, encoding="utf-8", timeout=60
        )
        try:
            child.expect("you>")
            child.sendline("/modes")
            child.expect("workflow_authoring")
            child.expect("you>")
            child.sendline("Buy three for me")
            child.expect(r"agent_calculator\(")
            child.expect("59.97")
            child.expect("approval needed:.*Charge 59.97\\?")
            child.expect("approve\\?")
            child.sendline("y")
            child.expect("Charged.")
            child.expect("you>")
            child.sendline("/mode calculation")
            child.expect("Mode is now .*calculation")
            child.expect("you>")
            child.sendline("/quit")
            child.expect(pexpect.EOF)
        finally:
            child.close()
        assert child.exitstatus == 0
        server.assert_complete()
        resumed = server.requests[2]["messages"][-1]
        assert resumed == {"role": "tool", "tool_call_id": "a1", "content": '{"approved": true}'}


def test_chat_without_a_model_says_which_settings_to_set(tmp_path: Path) -> None:
    env = {**os.environ, "APTIX_DATA_DIR": str(tmp_path)}
    env.pop("APTIX_LLM_MODEL", None)
    child = pexpect.spawn(
        sys.executable, ["-m", "aptix", "chat"], env=env, encoding="utf-8", timeout=60
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2
    assert "set APTIX_LLM_MODEL" in (child.before or "")
