"""The Workflows list shows the status of the version served, and marks a pending draft.

Review r3-F1: the Status column showed the pending draft's own status, so a published or
deprecated workflow being edited read "draft" and a disabled one with a draft was left out.
Fixer f1, round 67: a disabled one with a draft was then listed under the draft's title, and
left out or shown by the draft's visibility, not the version served's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from aptix.settings import AptixSettings
from tests.console.browser import in_process
from tests.console.conftest import PageFactory

ADMIN = {"Authorization": "Bearer key-admin"}
FIELDS = {
    "userIntentPatterns": ["order office chairs"],
    "instructionText": "Order the chairs.",
    "permittedTools": ["agent_calculator"],
    "completionCriteria": ["The chairs are ordered."],
}
#: id -> (the status set after publishing, whether a draft is then left pending).
WORKFLOWS = {
    "served_pub": ("published", True),
    "served_dep": ("deprecated", True),
    "served_dis": ("disabled", True),
    "plain_pub": ("published", False),
    "plain_dep": ("deprecated", False),
    "plain_dis": ("disabled", False),
}
#: Disabled workflows whose pending draft changes them: id -> (the disabled version's title and
#: visibility, the draft's).
RETITLED = {
    "dis_public": (("Served chairs", "public"), ("Draft chairs", "hidden")),
    "dis_hidden": (("Hidden chairs", "hidden"), ("Shown chairs", "public")),
}


def _author(url: str, **arguments: Any) -> dict[str, Any]:
    answer = httpx.post(
        f"{url}/v1/tools/agent_workflow_authoring/invoke",
        json={"arguments": arguments},
        headers=ADMIN,
    )
    result: dict[str, Any] = answer.json()["result"]
    assert result["ok"], result
    return result


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = AptixSettings(
        data_dir=Path(tmp_path_factory.mktemp("console-served-status")),
        load_plugins=False,
        semantic_matching=False,
        api_keys="key-admin=acme:ann:admin,key-user=acme:uma",
        llm_model=None,
    )
    with in_process(settings) as served:
        for wid, (status, pending) in WORKFLOWS.items():
            _author(served, operation="draft_workflow", workflowId=wid, title=wid, description="d")
            _author(served, operation="update_workflow", workflowId=wid, fields=FIELDS)
            _author(served, operation="publish_workflow", workflowId=wid)
            if status != "published":
                _author(
                    served, operation="update_workflow", workflowId=wid, fields={"status": status}
                )
            if pending:
                _author(
                    served, operation="update_workflow", workflowId=wid, fields={"notes": ["edit"]}
                )
        for wid, ((title, visibility), (draft_title, draft_visibility)) in RETITLED.items():
            _author(
                served, operation="draft_workflow", workflowId=wid, title=title, description="d"
            )
            fields = {**FIELDS, "visibility": visibility}
            _author(served, operation="update_workflow", workflowId=wid, fields=fields)
            _author(served, operation="publish_workflow", workflowId=wid)
            disable = {"status": "disabled"}
            _author(served, operation="update_workflow", workflowId=wid, fields=disable)
            drafted = {"title": draft_title, "visibility": draft_visibility}
            _author(served, operation="update_workflow", workflowId=wid, fields=drafted)
        yield served


@pytest.mark.parametrize(("workflow_id", "expected"), WORKFLOWS.items())
def test_each_row_shows_the_served_status_and_marks_a_pending_draft(
    url: str, open_page: PageFactory, workflow_id: str, expected: tuple[str, bool]
) -> None:
    status, pending = expected
    page = open_page(key="key-user")
    page.goto(f"{url}/console/#/workflows")
    table = page.get_by_role("table", name="Workflows this key can run")
    rows = table.get_by_role("row").filter(has=page.locator("code", has_text=workflow_id))
    expect(rows).to_have_count(1)
    expect(rows.locator(".status")).to_have_text(status)
    expect(rows.locator(f".status.{status}")).to_have_count(1)
    expect(rows.locator(".badge", has_text="draft pending")).to_have_count(1 if pending else 0)
    expect(table.locator(".status.draft")).to_have_count(0)


def test_a_disabled_row_shows_the_disabled_versions_title_and_visibility_not_the_drafts(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-user")
    page.goto(f"{url}/console/#/workflows")
    table = page.get_by_role("table", name="Workflows this key can run")
    listed = table.get_by_role("row").filter(has=page.locator("code", has_text="dis_public"))
    expect(listed).to_have_count(1)
    expect(listed.get_by_role("link")).to_have_text("Served chairs")
    expect(listed.locator(".status.disabled")).to_have_count(1)
    expect(listed.locator(".badge", has_text="draft pending")).to_have_count(1)
    # Hidden as disabled: a public draft over it does not list it.
    hidden = table.get_by_role("row").filter(has=page.locator("code", has_text="dis_hidden"))
    expect(hidden).to_have_count(0)
    for draft_title in ("Draft chairs", "Shown chairs", "Hidden chairs"):
        expect(table).not_to_contain_text(draft_title)
