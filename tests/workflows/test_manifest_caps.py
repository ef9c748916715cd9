"""Manifest size limits: what every session's boot message lists, and what a column holds."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from aptix.db.engine import Database, open_database
from aptix.testing import RecordingLogger
from aptix.tools import AgentToolExecutionContext
from aptix.tools.builtin.workflow_authoring import WorkflowAuthoringTool
from aptix.workflows.authoring import WorkflowAuthoring
from aptix.workflows.loader import load_builtin
from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.registry import WorkflowRegistry
from aptix.workflows.sql_store import SqlWorkflowStore
from aptix.workflows.store import InMemoryWorkflowStore, WorkflowStore
from aptix.workflows.validation import (
    MAX_DESCRIPTION_LENGTH,
    MAX_ENTRIES,
    MAX_ENTRY_LENGTH,
    MAX_INPUT_NAME_LENGTH,
    MAX_PATTERN_LENGTH,
    MAX_PATTERNS,
    MAX_TITLE_LENGTH,
    limit_problems,
    validate_manifest,
)
from tests.databases import database_url, pg_url  # noqa: F401 (fixtures)
from tests.workflows.conftest import KNOWN_TOOLS, make_manifest
from tests.workflows.evalset import eval_catalog

REPO = Path(__file__).resolve().parents[2]
FIELDS = {
    "userIntentPatterns": ["plan the big thing"],
    "instructionText": "1. Plan it.",
    "permittedTools": ["agent_calculator"],
    "completionCriteria": ["Planned."],
}


def _repository_catalogs() -> list[WorkflowManifest]:
    manifests = [item.manifest for item in load_builtin()[0]]
    for path in sorted((REPO / "tests").rglob("catalog*.yaml")):
        manifests += [WorkflowManifest.model_validate(d) for d in yaml.safe_load(path.read_text())]
    return [*manifests, *eval_catalog()]


def test_every_catalog_in_the_repository_is_within_the_limits() -> None:
    catalogs = _repository_catalogs()
    assert len(catalogs) > 400
    assert {m.workflow_id: limit_problems(m) for m in catalogs if limit_problems(m)} == {}


def test_each_oversized_field_is_named_with_its_size_and_limit() -> None:
    manifest = make_manifest(
        title="T" * (MAX_TITLE_LENGTH + 1),
        description="Plan things. " * 9000,
        instructionText="x" * 20_001,
        version="1.0.0-rc." + "a" * 60,
    )
    problems = {p.field: p.message for p in validate_manifest(manifest, KNOWN_TOOLS)}
    assert problems == {
        "title": "title is too long (201 characters; the limit is 200).",
        "description": f"description is too long (116,999 characters; the limit is "
        f"{MAX_DESCRIPTION_LENGTH:,}).",
        "instructionText": "instructionText is too long (20,001 characters; the limit is 20,000).",
        "version": "version is too long (69 characters; the limit is 64).",
    }


def test_too_many_intent_patterns_is_one_problem_not_one_per_pattern() -> None:
    repeated = make_manifest(userIntentPatterns=["plan an offsite"] * 12_000)
    many = make_manifest(userIntentPatterns=[f"plan offsite number {i}" for i in range(25_000)])
    for manifest, count in ((repeated, "12,000"), (many, "25,000")):
        problems = validate_manifest(manifest, KNOWN_TOOLS)
        assert [p.to_wire() for p in problems if p.field.startswith("userIntent")][:1] == [
            {
                "field": "userIntentPatterns",
                "message": f"userIntentPatterns has {count} patterns; the limit is "
                f"{MAX_PATTERNS}. Keep the few phrasings that differ most.",
            }
        ]
        assert len(problems) <= MAX_PATTERNS + 1
    at_limit = make_manifest(userIntentPatterns=[f"plan offsite {i}" for i in range(MAX_PATTERNS)])
    assert validate_manifest(at_limit, KNOWN_TOOLS) == []


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:  # noqa: F811
    opened = await open_database(database_url)
    yield opened
    await opened.close()


async def _authoring(store: WorkflowStore) -> tuple[WorkflowAuthoringTool, WorkflowStore]:
    registry = WorkflowRegistry(known_tools=KNOWN_TOOLS)
    return WorkflowAuthoringTool(WorkflowAuthoring(store, registry), RecordingLogger()), store


async def _run(
    tool: WorkflowAuthoringTool, context: AgentToolExecutionContext, **arguments: Any
) -> Any:
    outcome = await tool.execute(json.dumps(arguments), context)
    assert outcome.successful, outcome.error_message
    return json.loads(outcome.result or "")


async def test_draft_and_update_refuse_oversized_fields_before_storing_them(
    context: AgentToolExecutionContext,
) -> None:
    tool, store = await _authoring(InMemoryWorkflowStore())
    big = await _run(
        tool,
        context,
        operation="draft_workflow",
        workflowId="boot_big",
        title="Big description",
        description="Plan things. " * 9000,
    )
    assert big["ok"] is False
    assert big["errors"][0]["field"] == "description"
    assert "the limit is 2,000" in big["errors"][0]["message"]
    assert await store.history("boot_big", "acme") == []

    drafted = await _run(
        tool,
        context,
        operation="draft_workflow",
        workflowId="offsite",
        title="Offsite",
        description="Plans an offsite.",
    )
    assert drafted["ok"] is True
    patterns = [f"plan offsite number {i}" for i in range(12_000)]
    refused = await _run(
        tool,
        context,
        operation="update_workflow",
        workflowId="offsite",
        fields={**FIELDS, "userIntentPatterns": patterns},
    )
    assert refused["ok"] is False
    assert refused["errors"][0]["field"] == "userIntentPatterns"
    assert len(await store.history("offsite", "acme")) == 1


async def test_a_version_longer_than_its_column_is_refused_readably(
    database: Database, context: AgentToolExecutionContext
) -> None:
    """Regression: on PostgreSQL (``varchar(64)``) this was "failed unexpectedly"."""
    tool, store = await _authoring(SqlWorkflowStore(database))
    drafted = await _run(
        tool,
        context,
        operation="draft_workflow",
        workflowId="ver_long",
        title="Version test",
        description="Testing long versions.",
    )
    assert drafted["ok"] is True
    for version in ("1.0.0-rc." + "a" * 60, "1.0.0+build." + "1" * 60):
        refused = await _run(
            tool,
            context,
            operation="update_workflow",
            workflowId="ver_long",
            fields={"version": version},
        )
        assert refused == {
            "ok": False,
            "errors": [
                {
                    "field": "version",
                    "message": f"version is too long ({len(version)} characters; the limit is 64).",
                }
            ],
        }
    longest = "1.0.0-rc." + "a" * 55
    assert len(longest) == 64
    stored = await _run(
        tool,
        context,
        operation="update_workflow",
        workflowId="ver_long",
        fields={"version": longest},
    )
    assert stored["ok"] is True, stored
    assert [r.manifest.version for r in await store.history("ver_long", "acme")] == [
        "0.1.0",
        longest,
    ]


def test_every_list_field_has_a_count_and_an_entry_limit() -> None:
    manifest = make_manifest(
        userIntentPatterns=["plan the big thing", "p" * (MAX_PATTERN_LENGTH + 50)],
        requiredInputs=[
            {"name": "n" * 100_000, "description": "d" * (MAX_ENTRY_LENGTH + 1)},
            *({"name": f"input{i}"} for i in range(MAX_ENTRIES)),
        ],
        completionCriteria=["c" * 300_000],
        notes=[f"note {i}" for i in range(MAX_ENTRIES + 1)],
        followUpOptions=["f" * (MAX_ENTRY_LENGTH + 1)],
    )
    problems = {p.field: p.message for p in limit_problems(manifest)}
    assert problems == {
        "userIntentPatterns.1": "userIntentPatterns.1 is too long (250 characters; the limit "
        "is 200).",
        "requiredInputs": f"requiredInputs has 51 entries; the limit is {MAX_ENTRIES}.",
        "requiredInputs.0.name": "requiredInputs.0.name is too long (100,000 characters; the "
        f"limit is {MAX_INPUT_NAME_LENGTH}).",
        "requiredInputs.0.description": "requiredInputs.0.description is too long (501 "
        "characters; the limit is 500).",
        "completionCriteria.0": "completionCriteria.0 is too long (300,000 characters; the "
        "limit is 500).",
        "notes": f"notes has 51 entries; the limit is {MAX_ENTRIES}.",
        "followUpOptions.0": "followUpOptions.0 is too long (501 characters; the limit is 500).",
    }
    # validate_manifest names each once, the long pattern included.
    fields = [p.field for p in validate_manifest(manifest, KNOWN_TOOLS)]
    assert fields.count("userIntentPatterns.1") == 1


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"userIntentPatterns": ["plan the big thing", "p" * 250]}, "userIntentPatterns.1"),
        ({"requiredInputs": [{"name": "n" * 100_000}]}, "requiredInputs.0.name"),
        ({"completionCriteria": ["c" * 300_000]}, "completionCriteria.0"),
        ({"notes": ["n" * 300_000]}, "notes.0"),
        ({"permittedTools": [f"agent_tool_{i}" for i in range(60)]}, "permittedTools"),
    ],
)
async def test_update_refuses_every_oversized_list_field_before_storing_it(
    database: Database,
    context: AgentToolExecutionContext,
    fields: dict[str, Any],
    field: str,
) -> None:
    """Regression: these were stored with ok:true, and starting the workflow then failed."""
    tool, store = await _authoring(SqlWorkflowStore(database))
    wid = "listy_" + field.replace(".", "_").lower()  # PostgreSQL keeps earlier cases' rows
    drafted = await _run(
        tool,
        context,
        operation="draft_workflow",
        workflowId=wid,
        title="Listy",
        description="Plans lists.",
    )
    assert drafted["ok"] is True
    refused = await _run(
        tool, context, operation="update_workflow", workflowId=wid, fields={**FIELDS, **fields}
    )
    assert refused["ok"] is False
    assert [e["field"] for e in refused["errors"]] == [field]
    assert len(await store.history(wid, "acme")) == 1
