"""Shared fixtures and the hypothesis profiles (CI runs the large example counts)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from aptix.testing import RecordingLogger
from aptix.tools import AgentToolExecutionContext

settings.register_profile(
    "ci", max_examples=2_000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=200, deadline=None)
settings.load_profile("ci" if os.environ.get("APTIX_CI") else "dev")


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
