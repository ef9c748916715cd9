"""``OTEL_TRACES_EXPORTER=console`` writes each span as one JSON object on one line of stderr.

With ``APTIX_LOG_JSON=true`` every line on stderr is JSON (README, docs/deployment.md#logs):
the SDK's own console format, a span pretty-printed over some thirty lines, broke that.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def _tools_call(tmp_path: Path, log_json: str) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.upper().startswith(("APTIX_", "OTEL_"))},
        "APTIX_DATA_DIR": str(tmp_path),
        "APTIX_SEMANTIC_MATCHING": "false",
        "APTIX_OTEL": "true",
        "APTIX_LOG_JSON": log_json,
        "OTEL_TRACES_EXPORTER": "console",
    }
    command = ["tools", "call", "agent_calculator", '{"expression": "6*7"}', "--json"]
    return subprocess.run(
        [sys.executable, "-m", "aptix", *command],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )


def test_with_json_logs_every_stderr_line_is_json_spans_included(tmp_path: Path) -> None:
    done = _tools_call(tmp_path, "true")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"]["result"] == 42
    lines = done.stderr.splitlines()
    parsed = [json.loads(line) for line in lines]  # each line on its own
    [span] = [p for p in parsed if p.get("name") == "execute_tool agent_calculator"]
    assert span["attributes"]["aptix.tool.outcome"] == "succeeded"
    assert span["context"]["trace_id"]


@pytest.mark.parametrize("log_json", ["false", "true"])
def test_a_console_span_is_one_line(tmp_path: Path, log_json: str) -> None:
    done = _tools_call(tmp_path, log_json)
    assert done.returncode == 0, done.stderr
    spans = [line for line in done.stderr.splitlines() if '"execute_tool agent_calculator"' in line]
    assert len(spans) == 1
    assert json.loads(spans[0])["kind"] == "SpanKind.INTERNAL"
