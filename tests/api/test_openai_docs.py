"""docs/openai-compatible.md, run as written against a live ``aptix serve``.

Its Python samples run with the server's URL in place of ``http://127.0.0.1:8000``, and its
``llm`` configuration drives the real ``llm`` command line: a second OpenAI client that Aptix
did not write.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aptix.llm.types import LlmResponse
from aptix.testing import call, reply
from aptix.testing.server import ScriptedOpenAIServer
from tests.api.live import scripted_model_env, serve

PAGE = Path(__file__).resolve().parents[2] / "docs" / "openai-compatible.md"
DOC_URL = "http://127.0.0.1:8000"


def answer(body: dict[str, Any]) -> LlmResponse:
    if (body.get("response_format") or {}).get("type") == "json_schema":
        return reply('{"city": "Oslo", "celsius": 4}')
    last = body["messages"][-1]
    if last["role"] == "tool":
        return reply(f"Thanks, the tool said {last['content']}.")
    text = str(last["content"])
    if "weather" in text and any(
        t["function"]["name"] == "get_weather" for t in body.get("tools") or ()
    ):
        return reply(None, call("get_weather", {"city": "Oslo"}))
    return reply(f"echo: {text.splitlines()[-1]}")


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with (
        ScriptedOpenAIServer(respond=answer) as model,
        serve(
            tmp_path_factory.mktemp("openai-docs"), **scripted_model_env(model.base_url)
        ) as running,
    ):
        yield running


SAMPLES = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)


@pytest.mark.parametrize("source", SAMPLES, ids=[f"sample-{i}" for i in range(len(SAMPLES))])
def test_the_page_samples_run(url: str, source: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert DOC_URL in source
    exec(compile(source.replace(DOC_URL, url), str(PAGE), "exec"), {"__name__": "doc_sample"})
    printed = capsys.readouterr().out
    said = ("echo:", "Thanks, the tool said", "city='Oslo' celsius=4")
    assert any(text in printed for text in said), printed


def test_the_llm_cli_runs_and_continues_one_session(url: str, tmp_path: Path) -> None:
    (config,) = re.findall(r"```yaml\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)
    (tmp_path / "extra-openai-models.yaml").write_text(config.replace(DOC_URL, url))
    env = {**os.environ, "LLM_USER_PATH": str(tmp_path)}
    env.pop("OPENAI_API_KEY", None)
    llm = [sys.executable, "-m", "llm"]
    before = len(httpx.get(f"{url}/v1/sessions").json())
    first = subprocess.run(
        [*llm, "-m", "aptix-general", "What can you do?"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "echo: What can you do?"
    again = subprocess.run(
        [*llm, "-c", "and then?"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "echo: and then?"
    sessions = httpx.get(f"{url}/v1/sessions").json()
    assert len(sessions) == before + 1  # `llm -c` continued the session by its conversation
