"""The DEBUG line of a failed call cuts its outside text to 500 characters, as the WARNING does."""

from __future__ import annotations

import logging
import re

import pytest

from aptix.logger import OUTSIDE_TEXT_LIMIT
from aptix.testing import call, reply
from tests.reasoner.conftest import Harness


async def test_the_debug_line_of_an_unknown_names_failure_cuts_the_name_in_its_message(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    name = "T" * 20_000  # the model's text: the error message quotes it
    harness.model.add(reply(None, call(name, {})), reply("sorry"))
    with caplog.at_level(logging.DEBUG, logger="aptix"):
        await harness.reasoner.execute(
            session_id=harness.session_id, org="acme", user="ann", instruction="go"
        )
    [line] = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.DEBUG and " failed: " in r.getMessage()
    ]
    name_part, message = line.split(" failed: ", 1)
    assert len(name_part) <= OUTSIDE_TEXT_LIMIT
    assert "Unknown tool" in message  # the message is there, cut
    assert len(message) <= OUTSIDE_TEXT_LIMIT
    assert message.endswith("…")
    assert max(len(run) for run in re.findall("T+", line)) <= OUTSIDE_TEXT_LIMIT
