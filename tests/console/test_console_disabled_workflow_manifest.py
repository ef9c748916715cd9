"""A disabled workflow's link (Workflows list, match playground) opens its manifest read-only.

Disabled workflows are listed as disabled and match with ``runnable: false``; their link led to
"Workflow '...' is disabled and cannot be run." alone, since ``GET /v1/workflows/{id}``
refuses them (409). The page now reads the authoring copy, which any key of the org may read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from aptix.settings import AptixSettings
from tests.console.browser import in_process
from tests.console.conftest import PageFactory

ADMIN = {"Authorization": "Bearer key-admin"}
FIELDS = {
    "userIntentPatterns": ["order office desks"],
    "instructionText": "Order the DISABLEDWF desks.",
    "permittedTools": ["agent_calculator"],
    "completionCriteria": ["The desks are ordered."],
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


def _publish_disabled(url: str, workflow_id: str, title: str) -> None:
    _author(url, operation="draft_workflow", workflowId=workflow_id, title=title, description="d")
    _author(url, operation="update_workflow", workflowId=workflow_id, fields=FIELDS)
    _author(url, operation="publish_workflow", workflowId=workflow_id)
    _author(url, operation="update_workflow", workflowId=workflow_id, fields={"status": "disabled"})


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = AptixSettings(
        data_dir=Path(tmp_path_factory.mktemp("console-disabled")),
        load_plugins=False,
        semantic_matching=False,
        api_keys="key-admin=acme:ann:admin,key-user=acme:uma",
        llm_model=None,
    )
    with in_process(settings) as served:
        _publish_disabled(served, "disabled_furniture", "Disabled furniture order")
        _publish_disabled(served, "redrafted_furniture", "Redrafted furniture order")
        # A draft pending over the disabled version: not the manifest the link stands for.
        _author(
            served,
            operation="update_workflow",
            workflowId="redrafted_furniture",
            fields={"instructionText": "A DRAFTONLY instruction."},
        )
        refused = httpx.get(f"{served}/v1/workflows/disabled_furniture", headers=ADMIN)
        assert refused.status_code == 409
        yield served


def _expect_read_only_manifest(page: Page) -> None:
    heading = page.get_by_role("heading", level=1)
    expect(heading).to_contain_text("Disabled furniture order")
    expect(heading.locator(".status.disabled")).to_have_text("disabled")
    expect(page.get_by_role("status")).to_contain_text(
        "This workflow is disabled: it is shown read-only, matches with runnable: false and "
        "cannot be run."
    )
    main = page.locator("main")
    expect(main).to_contain_text("Order the DISABLEDWF desks.")
    expect(main).to_contain_text("order office desks")
    expect(main).not_to_contain_text("is disabled and cannot be run")
    expect(page.get_by_role("alert")).to_have_count(0)
    for name in ("Save draft", "Publish…", "Change status"):
        expect(page.get_by_role("button", name=name)).to_have_count(0)


def test_the_workflows_list_link_opens_the_disabled_manifest(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-user")  # reading the authoring copy needs no role
    page.goto(f"{url}/console/#/workflows")
    row = page.get_by_role("table", name="Workflows this key can run").get_by_role("row")
    listed = row.filter(has_text="disabled_furniture")
    expect(listed.locator(".status")).to_have_text("disabled")
    listed.get_by_role("link", name="Disabled furniture order").click()
    expect(page).to_have_url(f"{url}/console/#/workflows/disabled_furniture")
    _expect_read_only_manifest(page)


def test_the_playground_link_opens_the_disabled_manifest(url: str, open_page: PageFactory) -> None:
    page = open_page(key="key-user")
    page.goto(f"{url}/console/#/workflows")
    page.get_by_label("Request").fill("order office desks")
    page.get_by_role("button", name="Match").click()
    found = page.get_by_role("table", name="Candidates, best first")
    candidate = found.get_by_role("row").filter(has_text="Disabled furniture order")
    expect(candidate.get_by_role("cell").nth(2)).to_have_text("no")
    candidate.get_by_role("link", name="Disabled furniture order").click()
    _expect_read_only_manifest(page)


def test_a_draft_over_a_disabled_version_is_not_shown_as_its_manifest(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-user")
    page.goto(f"{url}/console/#/workflows/redrafted_furniture")
    expect(page.get_by_role("heading", level=1)).to_have_text("Redrafted furniture order")
    expect(page.get_by_role("status")).to_have_text(
        "Workflow 'redrafted_furniture' is disabled and cannot be run."
    )
    expect(page.locator("main")).to_contain_text("The authoring copy is a draft (version")
    expect(page.get_by_role("link", name="Open it in Authoring")).to_have_attribute(
        "href", "#/authoring/redrafted_furniture"
    )
    expect(page.locator("main")).not_to_contain_text("DRAFTONLY")
