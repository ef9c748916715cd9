from __future__ import annotations

import pytest
from pydantic import ValidationError

from aptix.workflows.manifest import MANIFEST_FIELDS, SemVer, WorkflowManifest, WorkflowStatus
from tests.workflows.conftest import make_manifest


def test_pascal_case_input_and_camel_case_output() -> None:
    manifest = WorkflowManifest.model_validate(
        {
            "WorkflowId": "create_ddr",
            "Title": "Create a DDR",
            "UserIntentPatterns": ["create a new ddr"],
            "PermittedTools": ["agent_calculator"],
            "FollowUpOptions": "Review it.",
            "RequiredInputs": ["topic"],
            "AutoStart": True,
        }
    )
    wire = manifest.to_wire()
    assert wire["workflowId"] == "create_ddr"
    assert wire["userIntentPatterns"] == ["create a new ddr"]
    assert wire["followUpOptions"] == ["Review it."]
    assert wire["requiredInputs"] == [{"name": "topic", "description": "", "required": True}]
    assert wire["autoStart"] is True
    assert list(wire) == list(MANIFEST_FIELDS)


def test_active_is_accepted_as_published() -> None:
    assert make_manifest(status="Active").status is WorkflowStatus.PUBLISHED


@pytest.mark.parametrize("version", ["1.0", "v1.0.0", "1.0.0.0", "01.0.0", ""])
def test_bad_versions_are_rejected(version: str) -> None:
    with pytest.raises(ValidationError, match="is not a semantic version"):
        make_manifest(version=version)


def test_unknown_fields_and_bad_enums_are_rejected() -> None:
    with pytest.raises(ValidationError):
        make_manifest(colour="red")
    with pytest.raises(ValidationError):
        make_manifest(visibility="secret")
    with pytest.raises(ValidationError):
        make_manifest(workflowId="Has Spaces")


def test_semver_orders_by_precedence() -> None:
    ordered = [
        "0.9.9",
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-beta",
        "1.0.0",
        "1.0.1",
        "1.10.0",
        "2.0.0",
    ]
    assert sorted(ordered, key=SemVer) == ordered
    assert SemVer("1.0.0+build.5") == SemVer("1.0.0")
    assert str(SemVer("2.1.0-rc.1")) == "2.1.0-rc.1"


def test_runnable_statuses() -> None:
    assert make_manifest(status="published").runnable
    assert make_manifest(status="deprecated").runnable
    assert not make_manifest(status="disabled").runnable
    assert not make_manifest(status="draft").runnable
