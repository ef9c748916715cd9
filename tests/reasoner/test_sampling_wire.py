"""Sampling settings and extra headers reach the model endpoint, over the real ``openai`` client."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from aptix.errors import ConfigurationError
from aptix.llm.openai_client import OpenAiLlmClient
from aptix.llm.types import LlmRequest
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings, load_settings
from aptix.testing import reply
from aptix.testing.server import ScriptedOpenAIServer

REQUEST = LlmRequest(messages=({"role": "user", "content": "Hi"},))


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(api_key="sk-test") as running:
        yield running


def _settings(server: ScriptedOpenAIServer, tmp_path: Path, **extra: object) -> AptixSettings:
    return AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        llm_base_url=server.base_url,
        llm_api_key="sk-test",  # type: ignore[arg-type]
        llm_model="m-1",
        **extra,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("api", "stream", "cap"),
    [
        ("chat", False, "max_tokens"),
        ("chat", True, "max_tokens"),
        ("responses", False, "max_output_tokens"),
    ],
)
async def test_configured_sampling_and_headers_arrive(
    server: ScriptedOpenAIServer, tmp_path: Path, api: str, stream: bool, cap: str
) -> None:
    server.add(reply("Hello"))
    settings = _settings(
        server,
        tmp_path,
        llm_api=api,
        llm_temperature=0.2,
        llm_max_output_tokens=300,
        llm_extra_headers={"X-Gateway-Team": "ops", "api-key": "az-1"},
    )
    async with open_runtime(settings) as runtime:
        model = runtime.default_model()

        async def sink(_text: str) -> None:
            return None

        response = await model.complete(REQUEST, sink if stream else None)
    assert response.text == "Hello"
    [body] = server.requests
    assert body["temperature"] == 0.2
    assert body[cap] == 300
    assert "max_completion_tokens" not in body
    [headers] = server.headers
    assert headers["x-gateway-team"] == "ops"
    assert headers["api-key"] == "az-1"
    assert headers["authorization"] == "Bearer sk-test"
    server.assert_complete()


async def test_nothing_is_sent_when_unset(server: ScriptedOpenAIServer, tmp_path: Path) -> None:
    server.add(reply("Hello"))
    async with open_runtime(_settings(server, tmp_path)) as runtime:
        await runtime.default_model().complete(REQUEST)
    [body] = server.requests
    assert not {"temperature", "max_tokens", "max_completion_tokens"} & set(body)


@pytest.mark.parametrize(
    ("base_url", "cap"),
    [
        (None, "max_completion_tokens"),
        ("https://api.openai.com/v1", "max_completion_tokens"),
        ("https://acme.openai.azure.com/openai/v1/", "max_completion_tokens"),
        ("http://localhost:11434/v1", "max_tokens"),
        ("http://localhost:8080/v1", "max_tokens"),
    ],
)
def test_the_output_cap_is_named_for_the_endpoint(base_url: str | None, cap: str) -> None:
    client = OpenAiLlmClient(base_url=base_url, api_key="k", model="m", max_output_tokens=9)
    assert client._chat_sampling == {cap: 9}


def test_settings_read_json_headers_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("APTIX_LLM_EXTRA_HEADERS", json.dumps({"api-key": "az-1"}))
    monkeypatch.setenv("APTIX_LLM_TEMPERATURE", "0.7")
    monkeypatch.setenv("APTIX_LLM_MAX_OUTPUT_TOKENS", "1024")
    settings = load_settings()
    assert settings.llm_extra_headers == {"api-key": "az-1"}
    assert (settings.llm_temperature, settings.llm_max_output_tokens) == (0.7, 1024)


def test_a_header_value_must_be_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("APTIX_LLM_EXTRA_HEADERS", json.dumps({"X-A": "one\r\nX-B: two"}))
    with pytest.raises(ConfigurationError, match=r"APTIX_LLM_EXTRA_HEADERS.*one line of ASCII"):
        load_settings()


def test_the_providers_page_toml_sample_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "providers.md").read_text()
    [sample] = re.findall(r"```toml\n(.*?)```", page, re.DOTALL)
    (tmp_path / "aptix.toml").write_text(sample)
    monkeypatch.chdir(tmp_path)
    for name in ("APTIX_CONFIG_FILE", "APTIX_LLM_MODEL", "APTIX_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings()
    assert settings.llm_model == "qwen2.5:7b"
    assert settings.llm_extra_headers == {"X-Team": "ops"}
    assert (settings.llm_temperature, settings.llm_max_output_tokens) == (0.2, 2048)
