"""Test helpers shipped with Aptix so users test their tools the way we test ours."""

from aptix.testing.logger import LogRecord, RecordingLogger
from aptix.testing.models import FunctionModel, ScriptedModel, call, reply

__all__ = ["FunctionModel", "LogRecord", "RecordingLogger", "ScriptedModel", "call", "reply"]
