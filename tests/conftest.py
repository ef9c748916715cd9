"""Shared fixtures and the hypothesis profiles (CI runs the large example counts)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Generator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from pluggy import Result

from aptix.nul import without_surrogates
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import RecordingLogger
from aptix.tools import AgentToolExecutionContext

# pg_url and database_url (a test on SQLite and on PostgreSQL) live beside the database helpers.
pytest_plugins = ("tests.databases",)

settings.register_profile(
    "ci", max_examples=2_000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=200, deadline=None)
settings.load_profile("ci" if os.environ.get("APTIX_CI") else "dev")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Generator[None, Result[pytest.TestReport]]:
    """A report's captured output and failure text with lone surrogates made U+FFFD.

    The suite feeds hostile text (``"\\ud800"``) to Aptix on purpose. A report holding one,
    in a captured log line or an assertion's text, cannot be sent from an xdist worker
    (execnet refuses strings that are not UTF-8) and stopped the whole run with an
    INTERNALERROR instead of reporting the test.
    """
    outcome = yield
    report = outcome.get_result()
    report.sections = [(title, without_surrogates(text)) for title, text in report.sections]
    if report.longrepr is not None:
        text = str(report.longrepr)
        if without_surrogates(text) != text:
            report.longrepr = without_surrogates(text)


@pytest.fixture
def logger() -> RecordingLogger:
    return RecordingLogger()


@pytest.fixture
def context() -> AgentToolExecutionContext:
    return AgentToolExecutionContext(
        session_id="0123456789abcdef0123456789abcdef",
        conversation_id="conv-1",
        org="acme",
        user="ann",
    )


@pytest.fixture
def settings(tmp_path: Path) -> AptixSettings:
    """Settings for an isolated runtime: a fresh SQLite file, no plugins."""
    return AptixSettings(data_dir=tmp_path, load_plugins=False)


@pytest.fixture
async def runtime(settings: AptixSettings) -> AsyncIterator[Runtime]:
    async with open_runtime(settings) as opened:
        yield opened
