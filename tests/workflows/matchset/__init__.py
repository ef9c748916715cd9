"""The labelled matching set: an evaluation catalog and hand-written, labelled user messages.

``catalog.yaml`` holds realistic workflows served beside the built-in ones for evaluation only;
``messages.yaml`` maps each workflow id to messages that should match it, and ``none`` to
off-topic and near-miss messages that must match nothing.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from aptix.workflows.manifest import WorkflowManifest

__all__ = ["Labelled", "catalog", "labelled"]

HERE = Path(__file__).parent


@dataclass(frozen=True, slots=True)
class Labelled:
    """One user message and the workflow it should match (None: it should match nothing)."""

    message: str
    expected: str | None


def _manifest(entry: dict[str, Any]) -> WorkflowManifest:
    title = entry["title"]
    return WorkflowManifest(
        workflow_id=entry["workflowId"],
        title=title,
        description=" ".join(entry["description"].split()),
        user_intent_patterns=tuple(entry["userIntentPatterns"]),
        instruction_text=f"1. Ask the user for what {title.lower()} needs.\n2. Do it.",
        completion_criteria=("The user confirmed the result.",),
        version="1.0.0",
    )


@functools.cache
def catalog() -> tuple[WorkflowManifest, ...]:
    """The evaluation catalog (served beside the built-in workflows)."""
    entries = yaml.safe_load((HERE / "catalog.yaml").read_text(encoding="utf-8"))
    return tuple(_manifest(entry) for entry in entries)


@functools.cache
def labelled() -> tuple[Labelled, ...]:
    """Every labelled message, in file order."""
    groups = yaml.safe_load((HERE / "messages.yaml").read_text(encoding="utf-8"))
    return tuple(
        Labelled(message, None if key == "none" else key)
        for key, messages in groups.items()
        for message in messages
    )
