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

Training catalogs (``train/<name>/``): three more catalogs in other domains and writing styles
(rich, terse, mixed), each with requests, near misses and chit-chat, written by other authors
than the evaluation sets. The shipped weights are fitted on them and the development set.

Held out in the second round (``holdout2/``), written before this round's tuning and never
read while tuning: a catalog in new domains with its requests, near misses and chit-chat, and
fresh requests and near misses for ``catalog.yaml`` and ``terse_catalog.yaml``.

Held out in the third round (``holdout3/``), written before this round's tuning and never
read while tuning: general-assistant requests that ask for no workflow (``assistant``),
chit-chat, and fresh requests for the built-in workflows and for ``catalog.yaml``, all served
against the built-ins plus ``catalog.yaml``.

Held out in the twelfth round (``holdout4/h``, ``holdout4/i``), written by authors who read
only one training catalog (for its format) and the built-in workflows: two new catalogs in
the training catalogs' shape (a rich one: public library, solar installer, film production
office; a terse one: airport ground handling, recruitment agency, water utility), each with
eight kinds of request, the built-ins in their users' words, near misses, chit-chat and
general-assistant requests.

Training catalogs added in the seventeenth round (``train/j``, ``train/k``), written after
every held-out set by authors who read one training catalog (for its format) and the
built-in workflows, never a held-out set: an agricultural cooperative, a museum and gallery
and a home-care agency (second-person descriptions, first-person patterns); a telecom
operations centre, a car rental branch and a print shop (trade jargon, terse patterns).
Messages of theirs that happened to equal a held-out message were removed, so that adding
them left every held-out set as it was.

Candidate catalogs (``candidates/<name>/``) are written like the training catalogs but are
not yet in the shipped weights, so that the committed recipe (``bench.tune_encoder``,
``bench.fit_routing``, both reading :func:`training_sets`) still rebuilds the committed
files; a round that tries one reads :func:`candidate_sets` too, and moves it to ``train/``
when it ships. ``candidates/l``, written in the eighteenth round by the same kind of
authors: a school office, an online shop's operations team and a removals and storage
company (formal third-person descriptions, gerund patterns). Beside its eight kinds of
request it has ``situations.yaml``: three more indirect situations and three more problem
statements per workflow, the two kinds that never name the action and that every fold
ranked worst.

Exact duplicates (case and spacing aside) of a training message are dropped from the
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
    "REQUEST_KINDS",
    "Labelled",
    "TrainingSet",
    "candidate_sets",
    "catalog",
    "chitchat",
    "fresh",
    "holdout2",
    "holdout3",
    "holdout4",
    "labelled",
    "nearmiss",
    "request_kind",
    "request_kinds",
    "terse_catalog",
    "terse_labelled",
    "training_sets",
]

HERE = Path(__file__).parent


@dataclass(frozen=True, slots=True)
class Labelled:
    """One user message and the workflow it should match (None: it should match nothing)."""

    message: str
    expected: str | None
    #: Small talk (off-topic and sharing no vocabulary with a catalog), not a near miss.
    chat: bool = False


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


def _catalog(path: Path) -> tuple[WorkflowManifest, ...]:
    entries = yaml.safe_load(path.read_text(encoding="utf-8"))
    return tuple(_manifest(entry) for entry in entries)


@functools.cache
def catalog() -> tuple[WorkflowManifest, ...]:
    """The evaluation catalog (served beside the built-in workflows)."""
    return _catalog(HERE / "catalog.yaml")


@functools.cache
def terse_catalog() -> tuple[WorkflowManifest, ...]:
    """The second, terse evaluation catalog (served beside the built-in workflows)."""
    return _catalog(HERE / "terse_catalog.yaml")


def _key(message: str) -> str:
    return " ".join(message.casefold().split())


def _held_out(name: str, keys: tuple[str, ...] | None = None) -> tuple[Labelled, ...]:
    """The groups of one held-out file, without exact duplicates of training messages."""
    groups = yaml.safe_load((HERE / name).read_text(encoding="utf-8"))
    seen = {_key(row.message) for row in labelled()}
    seen |= {_key(row.message) for t in training_sets()[1:] for row in t.rows}
    out: list[Labelled] = []
    for key, messages in groups.items():
        if keys is not None and key not in keys:
            continue
        expected = None if key in ("none", *NONE_KEYS) else key
        for message in messages:
            if _key(message) not in seen:
                seen.add(_key(message))
                out.append(Labelled(message, expected, key == "chitchat"))
    return tuple(out)


#: Group names whose messages must match nothing. ``workflow_diagnostics`` is hidden: a hidden
#: workflow starts only when named by id and is never matched from free text (TUL-006 §7.8),
#: so a request for it in other words must match nothing.
NONE_KEYS = ("nearmiss", "nearmiss_terse", "chitchat", "workflow_diagnostics", "assistant")


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
        Labelled(message, None if key in ("none", *NONE_KEYS) else key)
        for key, messages in groups.items()
        for message in messages
    )


@dataclass(frozen=True, slots=True)
class TrainingSet:
    """One catalog and its labelled messages, fitted on."""

    name: str
    catalog: tuple[WorkflowManifest, ...]
    rows: tuple[Labelled, ...]


def _grouped(path: Path) -> tuple[Labelled, ...]:
    groups = yaml.safe_load(path.read_text(encoding="utf-8"))
    return tuple(
        Labelled(message, None if key in ("none", *NONE_KEYS) else key, key == "chitchat")
        for key, messages in groups.items()
        for message in messages
    )


def _situations(folder: Path) -> tuple[Labelled, ...]:
    """A training catalog's extra requests by kind (``situations.yaml``), where it has them."""
    path = folder / "situations.yaml"
    if not path.exists():
        return ()
    groups = yaml.safe_load(path.read_text(encoding="utf-8"))
    return tuple(
        Labelled(message, workflow_id, False)
        for workflow_id, kinds in groups.items()
        for messages in kinds.values()
        for message in messages
    )


def _folders() -> list[Path]:
    """The training catalogs' folders, then the candidates', each in name order."""
    return [
        folder
        for parent in ("train", "candidates")
        for folder in sorted(p for p in (HERE / parent).iterdir() if p.is_dir())
    ]


@functools.cache
def _sets() -> tuple[TrainingSet, ...]:
    out = [TrainingSet("development", catalog(), labelled())]
    seen = {_key(row.message) for row in labelled()}
    for folder in _folders():
        rows = []
        for row in _grouped(folder / "messages.yaml") + _situations(folder):
            if _key(row.message) not in seen:
                seen.add(_key(row.message))
                rows.append(row)
        out.append(TrainingSet(folder.name, _catalog(folder / "catalog.yaml"), tuple(rows)))
    return tuple(out)


def training_sets() -> tuple[TrainingSet, ...]:
    """The development set first, then the training catalogs under ``train/``."""
    return tuple(t for t in _sets() if not (HERE / "candidates" / t.name).is_dir())


def candidate_sets() -> tuple[TrainingSet, ...]:
    """Catalogs written for training but not yet in the shipped weights (``candidates/``)."""
    return tuple(t for t in _sets() if (HERE / "candidates" / t.name).is_dir())


#: The kinds of request each training catalog writes for every workflow of its own, in order.
REQUEST_KINDS = ("command", "polite", "indirect", "goal", "typos", "long", "fragment", "problem")


@functools.cache
def request_kinds() -> dict[str, str]:
    """The kind of each training or candidate catalog's request for its own workflows."""
    out: dict[str, str] = {}
    for folder in _folders():
        own = {m.workflow_id for m in _catalog(folder / "catalog.yaml")}
        groups = yaml.safe_load((folder / "messages.yaml").read_text(encoding="utf-8"))
        for key, messages in groups.items():
            if key in own:
                for kind, message in zip(REQUEST_KINDS, messages, strict=True):
                    out.setdefault(_key(message), kind)
        extra = folder / "situations.yaml"
        if extra.exists():
            for kinds in yaml.safe_load(extra.read_text(encoding="utf-8")).values():
                for kind, messages in kinds.items():
                    for message in messages:
                        out.setdefault(_key(message), kind)
    return out


def request_kind(message: str) -> str | None:
    """The kind of a training catalog's request (None for any other message)."""
    return request_kinds().get(_key(message))


@functools.cache
def holdout2() -> tuple[TrainingSet, ...]:
    """The second round's held-out sets: a new catalog, and fresh messages for the old two.

    Messages already in a round-1 held-out set are dropped: each is scored once.
    """
    folder = HERE / "holdout2"
    first = {_key(r.message) for r in fresh() + terse_labelled() + nearmiss() + chitchat()}

    def new(rows: tuple[Labelled, ...]) -> tuple[Labelled, ...]:
        return tuple(r for r in rows if _key(r.message) not in first)

    return (
        TrainingSet(
            "new catalog",
            _catalog(folder / "catalog.yaml"),
            new(_held_out("holdout2/messages.yaml")),
        ),
        # Fresh requests and near misses for both older catalogs, served together.
        TrainingSet(
            "development + terse catalogs",
            catalog() + terse_catalog(),
            new(_held_out("holdout2/fresh_catalog.yaml")),
        ),
    )


@functools.cache
def holdout3() -> tuple[Labelled, ...]:
    """The third round's held-out messages for the built-ins plus ``catalog.yaml``.

    ``assistant`` messages (general-assistant requests) count as near misses, ``chitchat`` as
    chit-chat; messages already in an earlier held-out set are dropped.
    """
    earlier = fresh() + terse_labelled() + nearmiss() + chitchat()
    earlier += tuple(row for t in holdout2() for row in t.rows)
    seen = {_key(r.message) for r in earlier}
    return tuple(r for r in _held_out("holdout3/messages.yaml") if _key(r.message) not in seen)


@functools.cache
def holdout4() -> tuple[TrainingSet, ...]:
    """The twelfth round's held-out catalogs, each with its messages (served with the built-ins).

    ``assistant`` messages count as near misses; messages already in an earlier held-out set
    (or in ``h``, for ``i``) are dropped.
    """
    earlier = fresh() + terse_labelled() + nearmiss() + chitchat() + holdout3()
    earlier += tuple(row for t in holdout2() for row in t.rows)
    seen = {_key(r.message) for r in earlier}
    out = []
    for name in ("h", "i"):
        rows = []
        for row in _held_out(f"holdout4/{name}/messages.yaml"):
            if _key(row.message) not in seen:
                seen.add(_key(row.message))
                rows.append(row)
        out.append(
            TrainingSet(name, _catalog(HERE / "holdout4" / name / "catalog.yaml"), tuple(rows))
        )
    return tuple(out)
