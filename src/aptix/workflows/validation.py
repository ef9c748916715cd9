"""Whether a manifest may be served: the checks of TUL-006 §8.1, §8.8 and §10.2.

The same rules run at start-up (files), in ``aptix workflows validate`` and in the
authoring tool's ``validate_workflow``/``publish_workflow``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic.alias_generators import to_camel

from aptix.casing import any_case
from aptix.tool_names import is_known, is_pattern
from aptix.workflows.manifest import WorkflowManifest, WorkflowVisibility

__all__ = [
    "ALWAYS_OFFERED_TOOLS",
    "MAX_DESCRIPTION_LENGTH",
    "MAX_ENTRIES",
    "MAX_ENTRY_LENGTH",
    "MAX_INPUT_NAME_LENGTH",
    "MAX_INSTRUCTION_LENGTH",
    "MAX_PATTERNS",
    "MAX_PATTERN_LENGTH",
    "MAX_TITLE_LENGTH",
    "MAX_VERSION_LENGTH",
    "FieldProblem",
    "limit_problems",
    "parse_manifest",
    "parse_partial",
    "single_line_problems",
    "validate_manifest",
]

#: Offered to the model in every workflow, whatever its ``permittedTools`` say (DESIGN §6).
ALWAYS_OFFERED_TOOLS: frozenset[str] = frozenset(
    {
        "agent_change_mode",
        "agent_list_modes",
        "agent_workflow_registry",
        "agent_workflow_run",
        "request_user_approval",
    }
)

MIN_PATTERN_LENGTH = 3
# Every session's boot message lists each public workflow's title, description and intent
# patterns, so these bound what one workflow adds to every turn of its org. Each is several
# times what any catalog in the repository uses (docs/modes-and-workflows.md, "Limits").
MAX_PATTERN_LENGTH = 200
MAX_PATTERNS = 50
MAX_TITLE_LENGTH = 200
MAX_DESCRIPTION_LENGTH = 2_000
#: Sent whole to the model by get_workflow_manifest.
MAX_INSTRUCTION_LENGTH = 20_000
#: The ``workflow_revisions.version`` column is ``varchar(64)``.
MAX_VERSION_LENGTH = 64
# Starting a workflow returns its lists (inputs, criteria, notes...) whole to the model.
#: Entries of each other list field (``permittedTools``, ``requiredInputs``, ``notes``...).
MAX_ENTRIES = 50
#: Characters of one entry of those lists, and of a required input's description.
MAX_ENTRY_LENGTH = 500
MAX_INPUT_NAME_LENGTH = 100


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """One thing wrong with a manifest: the camelCase field and a sentence saying what."""

    field: str
    message: str

    def to_wire(self) -> dict[str, str]:
        """``{field, message}`` as the authoring tool returns it (TUL-006 §10.3)."""
        return {"field": self.field, "message": self.message}


def parse_manifest(data: Any) -> tuple[WorkflowManifest | None, list[FieldProblem]]:
    """Build a manifest from a mapping (YAML, JSON); type errors become field problems."""
    if not isinstance(data, Mapping):
        return None, [FieldProblem("", "A workflow manifest must be a mapping of fields.")]
    repeated = _repeated_spellings(data)
    try:
        manifest = WorkflowManifest.model_validate(dict(data))
    except ValidationError as exc:
        # A field's other spellings are reported once, as given twice, not as unknown fields.
        spare = {(key,) for given in repeated.values() for key in given[1:]}
        problems = [
            _describe(err)
            for err in exc.errors(include_url=False)
            if not (err["type"] == "extra_forbidden" and tuple(err["loc"]) in spare)
        ]
        return None, [*_repeated_problems(repeated), *problems]
    if repeated:
        return None, _repeated_problems(repeated)
    return manifest, []


def _repeated_spellings(data: Mapping[Any, Any]) -> dict[str, list[str]]:
    """Each field given in several spellings (``notes`` and ``Notes``): field -> the keys."""
    found: dict[str, list[str]] = {}
    for name in WorkflowManifest.model_fields:
        spellings = dict.fromkeys(c for c in any_case(name).choices if isinstance(c, str))
        given = [key for key in spellings if key in data]
        if len(given) > 1:
            found[to_camel(name)] = given
    return found


def _repeated_problems(repeated: Mapping[str, list[str]]) -> list[FieldProblem]:
    problems = []
    for field, given in repeated.items():
        times = "twice" if len(given) == 2 else f"{len(given)} times"
        keys = ", ".join(f"'{key}'" for key in given[:-1]) + f" and '{given[-1]}'"
        # The wording update_workflow uses for the same mistake.
        message = f"{field} is given {times} ({keys}); use one casing per field."
        problems.append(FieldProblem(field, message))
    return problems


def parse_partial(data: Any, bad: list[FieldProblem]) -> WorkflowManifest | None:
    """The manifest without the fields ``bad`` names, to find the remaining problems too."""
    if not isinstance(data, Mapping):
        return None
    broken = {p.field.split(".")[0].casefold() for p in bad}
    kept = {
        k: v
        for k, v in data.items()
        if str(k).casefold() not in broken and to_camel(str(k)).casefold() not in broken
    }
    try:
        return WorkflowManifest.model_validate(kept)
    except ValidationError:
        return None


def _describe(err: Any) -> FieldProblem:
    loc = [str(p) for p in err["loc"]]
    field = to_camel(loc[0]) if loc else ""
    where = ".".join([field, *loc[1:]]) if loc else ""
    kind = err["type"]
    if kind == "missing":
        # The field that is missing (``requiredInputs.0.name``), not the list it is missing in.
        return FieldProblem(where, f"{where} is missing.")
    if kind == "extra_forbidden":
        # The key as the file spells it (the last part of ``loc``), so a search finds it.
        where = ".".join([field, *loc[1:]]) if len(loc) > 1 else loc[0]
        return FieldProblem(where, f"'{where}' is not a workflow manifest field.")
    # Pydantic words the types by their Python names; JSON and YAML have lists and objects.
    message = _JSON_TYPES.get(kind) or str(err["msg"]).removeprefix("Value error, ")
    return FieldProblem(field, f"{where}: {message}.")


#: Pydantic error types whose messages name a Python type, said in JSON's words instead.
_JSON_TYPES = {
    "tuple_type": "Input should be a list",
    "list_type": "Input should be a list",
    "model_type": "Input should be an object",
    "model_attributes_type": "Input should be an object",
    "dict_type": "Input should be an object",
}


def validate_manifest(
    manifest: WorkflowManifest, known_tools: Collection[str]
) -> list[FieldProblem]:
    """Every reason ``manifest`` may not be served; empty when it is complete and consistent."""
    problems: list[FieldProblem] = []
    for name, value in (
        ("title", manifest.title),
        ("description", manifest.description),
        ("instructionText", manifest.instruction_text),
    ):
        if not value:
            problems.append(FieldProblem(name, f"{name} is missing."))
    if not manifest.user_intent_patterns:
        problems.append(FieldProblem("userIntentPatterns", "userIntentPatterns is missing."))
    if not manifest.completion_criteria:
        problems.append(FieldProblem("completionCriteria", "completionCriteria is missing."))
    problems.extend(limit_problems(manifest))
    # Past the limit the count is the problem; one message per extra pattern would bury it.
    problems.extend(_pattern_problems(manifest.user_intent_patterns[:MAX_PATTERNS]))
    problems.extend(_tool_problems(manifest.permitted_tools, known_tools))
    problems.extend(_consistency_problems(manifest))
    return problems


def limit_problems(manifest: WorkflowManifest) -> list[FieldProblem]:
    """The fields of ``manifest`` that are too long to store or to hand to the model."""
    problems = [
        _too_long(name, value, limit)
        for name, value, limit in (
            ("title", manifest.title, MAX_TITLE_LENGTH),
            ("description", manifest.description, MAX_DESCRIPTION_LENGTH),
            ("instructionText", manifest.instruction_text, MAX_INSTRUCTION_LENGTH),
            ("version", manifest.version, MAX_VERSION_LENGTH),
        )
        if len(value) > limit
    ]
    count = len(manifest.user_intent_patterns)
    if count > MAX_PATTERNS:
        problems.append(
            FieldProblem(
                "userIntentPatterns",
                f"userIntentPatterns has {count:,} patterns; the limit is {MAX_PATTERNS}. "
                "Keep the few phrasings that differ most.",
            )
        )
    problems += _entry_problems(
        "userIntentPatterns", manifest.user_intent_patterns[:MAX_PATTERNS], MAX_PATTERN_LENGTH
    )
    lists = (
        ("permittedTools", manifest.permitted_tools),
        ("completionCriteria", manifest.completion_criteria),
        ("followUpOptions", manifest.follow_up_options),
        ("preconditions", manifest.preconditions),
        ("notes", manifest.notes),
        ("destructiveActions", manifest.destructive_actions),
        ("allowedTransitions", manifest.allowed_transitions),
    )
    for name, size in (
        ("requiredInputs", len(manifest.required_inputs)),
        *((name, len(values)) for name, values in lists),
    ):
        if size > MAX_ENTRIES:
            problems.append(
                FieldProblem(name, f"{name} has {size:,} entries; the limit is {MAX_ENTRIES}.")
            )
    # Past the count only the first entries are measured, so the count stays the news.
    for i, item in enumerate(manifest.required_inputs[:MAX_ENTRIES]):
        where = f"requiredInputs.{i}"
        if len(item.name) > MAX_INPUT_NAME_LENGTH:
            problems.append(_too_long(f"{where}.name", item.name, MAX_INPUT_NAME_LENGTH))
        if len(item.description) > MAX_ENTRY_LENGTH:
            problems.append(_too_long(f"{where}.description", item.description, MAX_ENTRY_LENGTH))
    for name, values in lists:
        problems += _entry_problems(name, values[:MAX_ENTRIES], MAX_ENTRY_LENGTH)
    return problems


#: The fields whose text, or each of whose entries, is one line: the boot message lists them a
#: line each, and the console edits a list one entry a line. Description and instruction
#: text may hold several lines.
SINGLE_LINE_LISTS = (
    "userIntentPatterns",
    "permittedTools",
    "completionCriteria",
    "followUpOptions",
    "preconditions",
    "notes",
    "destructiveActions",
    "allowedTransitions",
)


def single_line_problems(manifest: WorkflowManifest, fields: Collection[str]) -> list[FieldProblem]:
    """The line breaks (and other control characters) in the one-line ``fields`` of a change.

    Only a draft or an update is held to this: a revision stored before the rule still loads.
    """
    texts: list[tuple[str, str]] = []
    if "title" in fields:
        texts.append(("title", manifest.title))
    wire = manifest.to_wire()
    for name in SINGLE_LINE_LISTS:
        if name in fields:
            texts += [(f"{name}.{i}", value) for i, value in enumerate(wire[name][:MAX_ENTRIES])]
    if "requiredInputs" in fields:
        for i, item in enumerate(manifest.required_inputs[:MAX_ENTRIES]):
            texts += [
                (f"requiredInputs.{i}.name", item.name),
                (f"requiredInputs.{i}.description", item.description),
            ]
    return [
        FieldProblem(
            where,
            f"{where} must be one line: it holds a line break or another control character"
            + (" (give each line as an entry of its own)." if "." in where else "."),
        )
        for where, text in texts
        if _breaks_line(text)
    ]


def _breaks_line(text: str) -> bool:
    # Cc covers \n, \r, tab and the C1 controls (NEL); Zl and Zp are U+2028 and U+2029.
    return any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in text)


def _entry_problems(name: str, values: tuple[str, ...], limit: int) -> list[FieldProblem]:
    return [
        _too_long(f"{name}.{i}", value, limit)
        for i, value in enumerate(values)
        if len(value) > limit
    ]


def _too_long(name: str, value: str, limit: int) -> FieldProblem:
    return FieldProblem(
        name, f"{name} is too long ({len(value):,} characters; the limit is {limit:,})."
    )


def _pattern_problems(patterns: tuple[str, ...]) -> list[FieldProblem]:
    problems: list[FieldProblem] = []
    seen: set[str] = set()
    for i, pattern in enumerate(patterns):
        where = f"userIntentPatterns.{i}"
        key = " ".join(pattern.casefold().split())
        if len(key) < MIN_PATTERN_LENGTH:
            problems.append(
                FieldProblem(where, f"Intent pattern '{pattern}' is too short to match anything.")
            )
        elif len(pattern) > MAX_PATTERN_LENGTH:
            continue  # limit_problems names it
        elif key in seen:
            problems.append(FieldProblem(where, f"Intent pattern '{pattern}' is repeated."))
        seen.add(key)
    return problems


def _tool_problems(tools: tuple[str, ...], known_tools: Collection[str]) -> list[FieldProblem]:
    # The always-offered tools are available in every workflow, so listing one is harmless.
    known = [*known_tools, *ALWAYS_OFFERED_TOOLS]
    problems: list[FieldProblem] = []
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        if not is_known(tool, known):
            # `*` or `agent_*` would take every built-in tool and switch the guard off.
            hint = " (a name ending in '*' must be a configured MCP server's <prefix>_*)"
            problems.append(
                FieldProblem(
                    f"permittedTools.{i}",
                    f"permittedTools names an unknown tool '{tool}'"
                    f"{hint if is_pattern(tool) else ''}.",
                )
            )
        elif tool.casefold() in seen:
            problems.append(
                FieldProblem(f"permittedTools.{i}", f"permittedTools lists '{tool}' twice.")
            )
        seen.add(tool.casefold())
    return problems


def _consistency_problems(manifest: WorkflowManifest) -> list[FieldProblem]:
    problems: list[FieldProblem] = []
    if manifest.visibility is WorkflowVisibility.HIDDEN and manifest.auto_start:
        problems.append(
            FieldProblem(
                "autoStart",
                "A hidden workflow cannot be autoStart: it may only start when named by id.",
            )
        )
    if manifest.destructive_actions and not manifest.requires_approval:
        problems.append(
            FieldProblem(
                "requiresApproval",
                "A workflow with destructiveActions must set requiresApproval: true.",
            )
        )
    for field, values in (
        ("preconditions", manifest.preconditions),
        ("followUpOptions", manifest.follow_up_options),
        ("destructiveActions", manifest.destructive_actions),
        ("completionCriteria", manifest.completion_criteria),
    ):
        for i, value in enumerate(values):
            if not value:
                problems.append(FieldProblem(f"{field}.{i}", f"{field} has an empty entry."))
    if len({p.casefold() for p in manifest.preconditions}) != len(manifest.preconditions):
        problems.append(FieldProblem("preconditions", "preconditions repeat an entry."))
    if manifest.workflow_id in manifest.allowed_transitions:
        problems.append(
            FieldProblem(
                "allowedTransitions",
                "allowedTransitions must not name the workflow itself.",
            )
        )
    names = [i.name.casefold() for i in manifest.required_inputs]
    if len(set(names)) != len(names):
        problems.append(FieldProblem("requiredInputs", "requiredInputs repeat an input name."))
    return problems
