"""The labelled matching set: an evaluation catalog and hand-written, labelled user messages.

``catalog.yaml`` holds realistic workflows served beside the built-in ones for evaluation only;
``messages.yaml`` maps each workflow id to messages that should match it, and ``none`` to
off-topic and near-miss messages that must match nothing. That is the development set: the
only one the shipped weights are fitted on.

Held out from fitting (issue 22), written before the ranker and gate were tuned:

* ``fresh.yaml`` - new phrasings for ``catalog.yaml`` by another method (questions, commands,
  indirect requests, typos);
* ``terse_catalog.yaml`` + ``terse_messages.yaml`` - a second catalog in a terse style with
  two sibling families (DDR, invoice) and requests for it;
* ``nearmiss.yaml`` - near misses for both catalogs and chit-chat, all to match nothing.

Exact duplicates (case and spacing aside) of a development message are dropped from the
held-out sets, so that no message is scored by a model fitted on it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from aptix.workflows.manifest import WorkflowManifest

__all__ = [
    "Labelled",
    "catalog",
    "chitchat",
    "fresh",
    "labelled",
    "nearmiss",
    "terse_catalog",
    "terse_labelled",
]

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
def terse_catalog() -> tuple[WorkflowManifest, ...]:
    """The second, terse evaluation catalog (served beside the built-in workflows)."""
    entries = yaml.safe_load((HERE / "terse_catalog.yaml").read_text(encoding="utf-8"))
    return tuple(_manifest(entry) for entry in entries)


def _key(message: str) -> str:
    return " ".join(message.casefold().split())


def _held_out(name: str, keys: tuple[str, ...] | None = None) -> tuple[Labelled, ...]:
    """The groups of one held-out file, without exact duplicates of development messages."""
    groups = yaml.safe_load((HERE / name).read_text(encoding="utf-8"))
    seen = {_key(row.message) for row in labelled()}
    out: list[Labelled] = []
    for key, messages in groups.items():
        if keys is not None and key not in keys:
            continue
        expected = None if key in ("none", *NONE_KEYS) else key
        for message in messages:
            if _key(message) not in seen:
                seen.add(_key(message))
                out.append(Labelled(message, expected))
    return tuple(out)


#: Group names in the held-out files whose messages must match nothing.
NONE_KEYS = ("nearmiss", "nearmiss_terse", "chitchat")


@functools.cache
def fresh() -> tuple[Labelled, ...]:
    """Held-out requests for ``catalog.yaml`` and the built-in workflows."""
    return _held_out("fresh.yaml")


@functools.cache
def terse_labelled() -> tuple[Labelled, ...]:
    """Held-out requests for ``terse_catalog.yaml`` and its near misses."""
    return _held_out("terse_messages.yaml") + _held_out("nearmiss.yaml", ("nearmiss_terse",))


@functools.cache
def nearmiss() -> tuple[Labelled, ...]:
    """Held-out near misses on ``catalog.yaml``'s vocabulary (all expected to match nothing)."""
    return _held_out("nearmiss.yaml", ("nearmiss",))


@functools.cache
def chitchat() -> tuple[Labelled, ...]:
    """Held-out small talk (all expected to match nothing)."""
    return _held_out("nearmiss.yaml", ("chitchat",))


@functools.cache
def labelled() -> tuple[Labelled, ...]:
    """Every labelled message, in file order."""
    groups = yaml.safe_load((HERE / "messages.yaml").read_text(encoding="utf-8"))
    return tuple(
        Labelled(message, None if key == "none" else key)
        for key, messages in groups.items()
        for message in messages
    )
