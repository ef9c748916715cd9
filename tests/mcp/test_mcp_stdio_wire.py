"""``aptix mcp``: nothing but JSON-RPC on stdout, and every unreadable line answered as such."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PRINTING_MODULE = '''
import aptix

print("printed while the tool module is imported")
print("\\x1b]0;retitled by a module\\x07")


@aptix.tool(usage="Call this to echo.")
async def loud_echo(text: str) -> str:
    """Echo a text.

    Args:
        text: The text to echo.
    """
    return text
'''


def test_stdout_carries_only_json_rpc_and_bad_lines_are_refused_in_words(
    tmp_path: Path,
) -> None:
    module = tmp_path / "printing_tools.py"
    module.write_text(PRINTING_MODULE, encoding="utf-8")
    deep = "[" * 300 + "]" * 300
    lines = [
        # Not UTF-8: refused, never run with the bytes replaced.
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name":'
        b' "agent_hello_world", "arguments": {"name": "\xff\xfe"}}}',
        # Well-formed, but deeper than the parser reads: not "not JSON".
        f'{{"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {{"x": {deep}}}}}'.encode(),
        b'{"jsonrpc": "2.0", "id": 3, "method": "ping"}',
    ]
    # Stdin stays open until the three answers are in, as a client's does.
    with subprocess.Popen(
        [sys.executable, "-m", "aptix", "mcp"],
        env={
            **os.environ,
            "APTIX_DATA_DIR": str(tmp_path),
            "APTIX_SEMANTIC_MATCHING": "false",
            "APTIX_TOOL_MODULES": str(module),
        },
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdin is not None
        assert process.stdout is not None
        assert process.stderr is not None
        try:
            process.stdin.write(b"\n".join(lines) + b"\n")
            process.stdin.flush()
            read = [process.stdout.readline() for _ in range(3)]
        finally:
            process.stdin.close()
            process.wait(timeout=120)
        err = process.stderr.read()
    out = b"".join(read).decode()
    answers = [json.loads(line) for line in out.splitlines()]  # each line is JSON-RPC
    assert "printed while the tool module is imported" in err.decode()
    # What a module prints reaches stderr inert, as under every other command.
    assert "retitled by a module" in err.decode()
    assert b"\x1b" not in err
    assert b"\x07" not in err
    assert len(answers) == 3, out
    assert answers[0]["error"] == {
        "code": -32700,
        "message": "Parse error: the message is not valid UTF-8.",
    }
    assert answers[1]["error"]["code"] == -32600
    assert "nested too deeply" in answers[1]["error"]["message"]
    assert answers[2] == {"jsonrpc": "2.0", "id": 3, "result": {}}
