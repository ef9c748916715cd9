"""Settings the docs call "not empty" refuse a blank value too; a host with a space is refused.

``APTIX_HOST=" "`` and ``APTIX_REDIS_KEY_PREFIX=" "`` passed ``min_length=1``, a blank
``APTIX_LLM_MODEL`` counted as a configured model named ``' '``, and
``APTIX_LLM_BASE_URL=http://a b`` passed (the HTTP library percent-encodes the host) although
a malformed URL stops start-up (review r4, F4). A tool file that is a directory is named so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aptix.errors import ConfigurationError, PluginLoadError
from aptix.settings import load_settings
from aptix.tools.modules import load_tool_modules

BLANK = "must not be empty or only spaces"


@pytest.fixture(autouse=True)
def _clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no aptix.toml of the checkout's
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))
    for variable in ("APTIX_HOST", "APTIX_REDIS_KEY_PREFIX", "APTIX_LLM_MODEL"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv("APTIX_LLM_BASE_URL", raising=False)


@pytest.mark.parametrize("variable", ["APTIX_HOST", "APTIX_REDIS_KEY_PREFIX"])
@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("", "String should have at least 1 character"),
        (" ", f"Value error, {BLANK}"),
        ("\t ", f"Value error, {BLANK}"),
    ],
)
def test_a_blank_host_or_key_prefix_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, why: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationError) as raised:
        load_settings()
    assert str(raised.value).startswith(f"Invalid settings: {variable}: {why}.")


def test_spaces_around_a_host_or_key_prefix_are_no_part_of_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("APTIX_HOST", " 127.0.0.1 ")
    monkeypatch.setenv("APTIX_REDIS_KEY_PREFIX", "acme \n")
    settings = load_settings()
    assert (settings.host, settings.redis_key_prefix) == ("127.0.0.1", "acme")


@pytest.mark.parametrize("value", ["", " ", " \t"])
def test_a_blank_model_is_no_model(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("APTIX_LLM_MODEL", value)
    settings = load_settings()
    assert settings.llm_model is None
    assert not settings.model_configured


def test_a_model_name_loses_the_spaces_around_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_LLM_MODEL", " gpt-4o-mini ")
    assert load_settings().llm_model == "gpt-4o-mini"


@pytest.mark.parametrize("url", ["http://a b/v1", "http://a<b/v1", "https://a%20b:8080/v1"])
def test_a_base_url_whose_host_has_a_space_is_refused(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.setenv("APTIX_LLM_BASE_URL", url)
    with pytest.raises(ConfigurationError) as raised:
        load_settings()
    message = str(raised.value)
    assert message.startswith("Invalid settings: APTIX_LLM_BASE_URL: Value error, ")
    assert "which has characters no host name has" in message


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:11434/v1",
        "https://api.example.com/v1",
        "http://10.0.0.7:8000/v1",
        "http://[::1]:8080/v1",
        "http://bücher.example/v1",
        "http://model_host/v1",
    ],
)
def test_ordinary_base_urls_still_pass(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("APTIX_LLM_BASE_URL", url)
    assert load_settings().llm_base_url == url


def test_a_tool_file_that_is_a_directory_is_named_so(tmp_path: Path) -> None:
    with pytest.raises(PluginLoadError) as raised:
        load_tool_modules([str(tmp_path)])
    assert str(raised.value) == f"Tool file {tmp_path} is a directory; name a Python file in it."
