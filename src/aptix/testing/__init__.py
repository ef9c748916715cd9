"""Test helpers shipped with Aptix so users test their tools the way we test ours."""

from aptix.testing.logger import LogRecord, RecordingLogger

__all__ = ["LogRecord", "RecordingLogger"]
