"""Manifest sources: the YAML files shipped in the package and a deployment's own folder.

Every file holds one workflow with camelCase (or PascalCase) keys. Problems are collected
with the file and workflow they concern, so that start-up and ``aptix workflows validate``
can report all of them at once.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from aptix.config_files import UnusableFile, parse_yaml, read_text
from aptix.errors import ConfigurationError
from aptix.invisible import on_one_line
from aptix.workflows.manifest import WorkflowManifest, WorkflowStatus
from aptix.workflows.validation import (
    FieldProblem,
    parse_manifest,
    parse_partial,
    validate_manifest,
)

__all__ = [
    "LoadedManifest",
    "ManifestProblem",
    "check_catalog",
    "collect_catalog",
    "format_problems",
    "load_builtin",
    "load_catalog",
    "load_file",
    "load_folder",
]

BUILTIN_SOURCE = "builtin"


@dataclass(frozen=True, slots=True)
class LoadedManifest:
    """A manifest and where it came from (a file path, or ``builtin:<name>``)."""

    manifest: WorkflowManifest
    source: str
    #: False when some fields failed to parse: checked for more problems, never served.
    complete: bool = True


@dataclass(frozen=True, slots=True)
class ManifestProblem:
    """A problem found while loading: which file, which workflow, which field, what.

    Its ``str`` is one line: how ``aptix workflows validate`` and the start-up error show it.
    """

    source: str
    workflow_id: str | None
    field: str
    message: str

    def __str__(self) -> str:
        who = f"workflow '{self.workflow_id}'" if self.workflow_id else "workflow"
        where = f", field '{self.field}'" if self.field else ""
        # A line break in the file's name, an id, a key or a quoted value is shown, never made:
        # the file must not write a line of its own ("All 7 workflows are valid.").
        return on_one_line(f"{self.source} ({who}{where}): {self.message}")


def load_builtin() -> tuple[list[LoadedManifest], list[ManifestProblem]]:
    """The workflows shipped inside the package."""
    loaded, problems = _builtin()
    return list(loaded), list(problems)


@functools.cache
def _builtin() -> tuple[tuple[LoadedManifest, ...], tuple[ManifestProblem, ...]]:
    """The shipped workflows, parsed once per process: every runtime opened reads them."""
    folder = resources.files("aptix.workflows") / "builtin"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".yaml")), key=lambda f: f.name)
    loaded, problems = _load_texts(
        (f"{BUILTIN_SOURCE}:{f.name}", f.read_text("utf-8")) for f in files
    )
    return tuple(loaded), tuple(problems)


def load_folder(path: Path) -> tuple[list[LoadedManifest], list[ManifestProblem]]:
    """The ``*.yaml`` workflows of a deployment's folder (one workflow per file)."""
    if not path.is_dir():
        return [], [ManifestProblem(str(path), None, "", "is not a folder of workflow files.")]
    texts: list[tuple[str, str]] = []
    problems: list[ManifestProblem] = []
    for file in sorted(path.glob("*.yaml")):
        text, problem = _read(file)
        if problem is not None:
            problems.append(problem)
        else:
            texts.append((str(file), text))
    loaded, more = _load_texts(texts)
    return loaded, problems + more


def _read(file: Path) -> tuple[str, ManifestProblem | None]:
    """A workflow file's text, or why it is not read (not a regular file, too large...)."""
    try:
        return read_text(file), None
    except UnusableFile as exc:
        return "", ManifestProblem(str(file), None, "", f"{exc}.")
    except (OSError, UnicodeDecodeError) as exc:
        return "", ManifestProblem(str(file), None, "", f"cannot be read ({exc}).")


def _load_texts(
    texts: Iterable[tuple[str, str]],
) -> tuple[list[LoadedManifest], list[ManifestProblem]]:
    loaded: list[LoadedManifest] = []
    problems: list[ManifestProblem] = []
    for source, text in texts:
        try:
            data = parse_yaml(text)
        except UnusableFile as exc:
            problems.append(ManifestProblem(source, None, "", f"{exc}."))
            continue
        manifest, found = parse_manifest(data)
        guess = data.get("workflowId") or data.get("WorkflowId") if isinstance(data, dict) else None
        problems.extend(_located(source, str(guess) if guess else None, found))
        if manifest is not None:
            loaded.append(LoadedManifest(manifest, source))
        else:
            partial = parse_partial(data, found)
            if partial is not None:
                loaded.append(LoadedManifest(partial, source, complete=False))
    return loaded, problems


def _located(
    source: str, workflow_id: str | None, found: Iterable[FieldProblem]
) -> list[ManifestProblem]:
    return [ManifestProblem(source, workflow_id, p.field, p.message) for p in found]


def check_catalog(
    loaded: Iterable[LoadedManifest],
    known_tools: Collection[str],
    reported: Collection[ManifestProblem] = (),
) -> list[ManifestProblem]:
    """Duplicate ids within one source set and every served manifest's validation problems.

    Drafts are never served from files, so a file whose status is ``draft`` is a problem too.
    """
    problems: list[ManifestProblem] = []
    first_seen: dict[str, str] = {}
    for item in loaded:
        wid = item.manifest.workflow_id
        if wid in first_seen:
            problems.append(
                ManifestProblem(
                    item.source,
                    wid,
                    "workflowId",
                    f"duplicate workflow id '{wid}' (also defined in {first_seen[wid]}).",
                )
            )
            continue
        first_seen[wid] = item.source
        if item.manifest.status is WorkflowStatus.DRAFT:
            problems.append(
                ManifestProblem(item.source, wid, "status", "a workflow file cannot hold a draft.")
            )
        # Disabled workflows are never served, but they still have to be well formed so
        # that re-enabling one cannot bring back a broken manifest.
        problems.extend(_located(item.source, wid, validate_manifest(item.manifest, known_tools)))
    return problems


def collect_catalog(
    known_tools: Collection[str], path: Path | None = None
) -> tuple[list[LoadedManifest], list[ManifestProblem]]:
    """Built-in workflows overlaid by ``path`` (a folder, or one file), and every problem.

    A workflow from ``path`` with the id of a built-in one replaces it.
    """
    builtin, problems = load_builtin()
    problems += check_catalog(builtin, known_tools, reported=list(problems))
    by_id = {item.manifest.workflow_id: item for item in builtin if item.complete}
    if path is not None:
        # A path that is neither a folder nor missing is read as one file, which says what
        # it is when it is not a regular one (a FIFO, a device).
        own, found = load_folder(path) if path.is_dir() or not path.exists() else load_file(path)
        problems += found
        problems += check_catalog(own, known_tools, reported=found)
        by_id.update({item.manifest.workflow_id: item for item in own if item.complete})
    return sorted(by_id.values(), key=lambda item: item.manifest.workflow_id), problems


def load_catalog(known_tools: Collection[str], folder: Path | None = None) -> list[LoadedManifest]:
    """The served catalog; raises ConfigurationError listing every problem (file, id, field)."""
    loaded, problems = collect_catalog(known_tools, folder)
    if problems:
        raise ConfigurationError(format_problems(problems), hint=VALIDATE_HINT)
    return loaded


def load_file(path: Path) -> tuple[list[LoadedManifest], list[ManifestProblem]]:
    """One workflow file."""
    text, problem = _read(path)
    if problem is not None:
        return [], [problem]
    return _load_texts([(str(path), text)])


VALIDATE_HINT = "run `aptix workflows validate` and fix the manifests it names"


def format_problems(problems: Collection[ManifestProblem]) -> str:
    """One message for a ``ConfigurationError``: a summary line, then one line per problem."""
    count = len(problems)
    head = f"Workflow catalog is invalid ({count} problem{'s' if count != 1 else ''}):"
    return "\n".join([head, *(f"  - {p}" for p in problems)])
