"""A workflow file's unknown key is named as the file spells it, and two spellings of one field
are reported as given twice (the wording of ``update_workflow``), not as an unknown field.

``intent_patterns`` was reported as ``'intentPatterns'`` (no search finds it in the file), and
``Notes`` beside ``notes`` as "'notes' is not a workflow manifest field".
"""

from __future__ import annotations

from pathlib import Path

from aptix.workflows.loader import ManifestProblem, collect_catalog
from tests.workflows.conftest import KNOWN_TOOLS
from tests.workflows.test_loader import GOOD, write


def _problems(path: Path) -> list[ManifestProblem]:
    return collect_catalog(KNOWN_TOOLS, path)[1]


def test_an_unknown_key_is_named_as_the_file_spells_it(tmp_path: Path) -> None:
    text = GOOD.format(wid="keys") + 'intent_patterns: [a typo]\n"bad\\e[32mkey": 1\n'
    text += "requiredInputs:\n  - {name: date, Nmae: x}\n"
    write(tmp_path, "keys.yaml", text)
    assert {(p.field, p.message) for p in _problems(tmp_path)} == {
        ("intent_patterns", "'intent_patterns' is not a workflow manifest field."),
        ("bad\x1b[32mkey", "'bad\x1b[32mkey' is not a workflow manifest field."),
        ("requiredInputs.0.Nmae", "'requiredInputs.0.Nmae' is not a workflow manifest field."),
    }


def test_a_field_in_two_spellings_is_reported_as_given_twice(tmp_path: Path) -> None:
    write(tmp_path, "two.yaml", GOOD.format(wid="two") + "notes: [first]\nNotes: [second]\n")
    assert [(p.workflow_id, p.field, p.message) for p in _problems(tmp_path)] == [
        ("two", "notes", "notes is given twice ('notes' and 'Notes'); use one casing per field.")
    ]
