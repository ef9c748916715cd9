"""TUL-010 §6 for agent_list_modes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from aptix import AgentToolRegistry
from aptix.modes.catalog import load_mode_catalog
from aptix.modes.models import ModeDefinition
from aptix.testing import RecordingLogger
from aptix.tools import AgentToolExecutionContext
from aptix.tools.builtin.list_modes import ListModesTool

MODE = ModeDefinition(
    id="c" * 32,
    key="review",
    display_name="Review",
    description="Review things.",
    system_prompt_summary="Be critical.",
    is_default=True,
    human_role_hints=("reviewer",),
    example_utterances=("Review my draft", "Check this"),
    instructions="Review carefully.",
)


@dataclass
class FakeCatalog:
    modes: list[ModeDefinition] | None = field(default_factory=lambda: [MODE])
    error: Exception | None = None
    calls: int = 0

    async def get_all_modes(self) -> list[ModeDefinition] | None:
        self.calls += 1
        if self.error:
            raise self.error
        return self.modes


def test_registers_under_the_contract(logger: RecordingLogger) -> None:
    registry = AgentToolRegistry(logger)
    registry.register(ListModesTool, lambda: ListModesTool(FakeCatalog(), logger))  # type: ignore[arg-type]
    assert registry.has_tool("agent_list_modes")
    schema = ListModesTool.schema()
    assert schema["parameters"]["required"] == []
    assert schema["parameters"]["properties"]["includeExamples"]["type"] == "boolean"


@pytest.mark.parametrize("args", ["", "{}", '{"includeExamples": false}'])
async def test_happy_path_returns_modes_without_examples(
    logger: RecordingLogger, context: AgentToolExecutionContext, args: str
) -> None:
    tool = ListModesTool(FakeCatalog(), logger)  # type: ignore[arg-type]
    outcome = await tool.execute(args, context)
    assert outcome.successful
    [first] = json.loads(outcome.result or "")["modes"]
    assert first == {
        "id": "c" * 32,
        "key": "review",
        "displayName": "Review",
        "description": "Review things.",
        "systemPromptSummary": "Be critical.",
        "isDefault": True,
        "humanRoleHints": ["reviewer"],
        "exampleUtterances": None,
    }


@pytest.mark.parametrize("args", ['{"includeExamples": true}', '{"IncludeExamples": true}'])
async def test_include_examples_returns_example_utterances(
    logger: RecordingLogger, context: AgentToolExecutionContext, args: str
) -> None:
    outcome = await ListModesTool(FakeCatalog(), logger).execute(args, context)  # type: ignore[arg-type]
    [first] = json.loads(outcome.result or "")["modes"]
    assert first["exampleUtterances"] == ["Review my draft", "Check this"]


async def test_builtin_catalog_lists_every_mode(
    logger: RecordingLogger, context: AgentToolExecutionContext
) -> None:
    catalog = load_mode_catalog()
    outcome = await ListModesTool(catalog, logger).execute('{"includeExamples": true}', context)
    modes = json.loads(outcome.result or "")["modes"]
    assert [m["key"] for m in modes] == list(catalog.keys)
    assert [m["isDefault"] for m in modes].count(True) == 1


async def test_catalog_exception_is_logged_and_returned_as_failure(
    logger: RecordingLogger, context: AgentToolExecutionContext
) -> None:
    catalog = FakeCatalog(error=RuntimeError("catalog store down"))
    outcome = await ListModesTool(catalog, logger).execute("{}", context)  # type: ignore[arg-type]
    assert not outcome.successful
    assert outcome.result is None
    assert outcome.error_message == "ListModesTool could not read the mode catalog."
    [record] = logger.of_kind("exception")
    assert record.tag == "[agent_list_modes_ExecuteAsync__Exception]"
    assert record.pairs["SessionId"] == context.session_id


async def test_catalog_returning_none_is_logged_and_returned_as_failure(
    logger: RecordingLogger, context: AgentToolExecutionContext
) -> None:
    outcome = await ListModesTool(FakeCatalog(modes=None), logger).execute("{}", context)  # type: ignore[arg-type]
    assert not outcome.successful
    assert len(logger.of_kind("error")) == 1


async def test_is_read_only_and_idempotent(
    logger: RecordingLogger, context: AgentToolExecutionContext
) -> None:
    catalog = FakeCatalog()
    tool = ListModesTool(catalog, logger)  # type: ignore[arg-type]
    first = await tool.execute("{}", context)
    second = await tool.execute("{}", context)
    assert first == second
    assert catalog.modes == [MODE]


async def test_bad_argument_type_is_described(
    logger: RecordingLogger, context: AgentToolExecutionContext
) -> None:
    outcome = await ListModesTool(FakeCatalog(), logger).execute(  # type: ignore[arg-type]
        '{"includeExamples": [1]}', context
    )
    assert not outcome.successful
    assert "'includeExamples'" in (outcome.error_message or "")
