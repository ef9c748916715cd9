"""Time settings are finite and at most a day: ``inf`` would lift the tool time limit the docs
promise, and a huge finite value overflows ``timedelta`` (a lease) or a socket timeout (review
r6, F4). Each is refused at start-up with one line naming the variable.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aptix.errors import ConfigurationError
from aptix.settings import load_settings

TIME_SETTINGS = [
    "APTIX_TOOL_TIMEOUT_SECONDS",
    "APTIX_LLM_TIMEOUT_SECONDS",
    "APTIX_TURN_LEASE_SECONDS",
]


@pytest.fixture(autouse=True)
def _clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no aptix.toml of the checkout's
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))
    for variable in TIME_SETTINGS:
        monkeypatch.delenv(variable, raising=False)


@pytest.mark.parametrize("variable", TIME_SETTINGS)
@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("inf", "Input should be a finite number"),
        ("-inf", "Input should be a finite number"),
        ("1e309", "Input should be a finite number"),
        ("nan", "Input should be a finite number"),
        ("1e300", "Input should be less than or equal to 86400"),
        ("86401", "Input should be less than or equal to 86400"),
    ],
)
def test_an_infinite_or_overflowing_time_setting_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, why: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationError) as raised:
        load_settings()
    assert str(raised.value).startswith(f"Invalid settings: {variable}: {why}.")


def test_a_day_is_the_longest_time_setting_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in TIME_SETTINGS:
        monkeypatch.setenv(variable, "86400")
    settings = load_settings()
    assert settings.tool_timeout_seconds == settings.turn_lease_seconds == 86_400.0
    assert settings.llm_timeout_seconds == 86_400.0
