from __future__ import annotations

import json

import pytest

from aptix.testing import RecordingLogger
from aptix.tools import AgentToolExecutionContext
from aptix.tools.builtin.user_approval import UserApprovalTool


def test_is_client_final() -> None:
    assert UserApprovalTool.is_fully_executed_on_server is False


async def test_normalises_the_payload_for_the_client(context: AgentToolExecutionContext) -> None:
    args = {
        "Prompt": "  Publish workflow 'onboarding' v2?  ",
        "action": "publish_workflow",
        "details": " ",
        "destructive": True,
    }
    outcome = await UserApprovalTool(RecordingLogger()).execute(json.dumps(args), context)
    assert outcome.successful
    assert json.loads(outcome.result or "") == {
        "kind": "approval_request",
        "prompt": "Publish workflow 'onboarding' v2?",
        "action": "publish_workflow",
        "details": None,
        "destructive": True,
        "choices": ["approve", "reject"],
        "conversationId": "conv-1",
        "sessionId": context.session_id,
    }


async def test_destructive_defaults_to_false(context: AgentToolExecutionContext) -> None:
    outcome = await UserApprovalTool(RecordingLogger()).execute('{"prompt": "Ok?"}', context)
    assert json.loads(outcome.result or "")["destructive"] is False


@pytest.mark.parametrize("args", ["{}", '{"prompt": ""}', '{"prompt": "   "}', '{"action": "x"}'])
async def test_prompt_is_required(context: AgentToolExecutionContext, args: str) -> None:
    outcome = await UserApprovalTool(RecordingLogger()).execute(args, context)
    assert not outcome.successful
    assert outcome.error_message == (
        "UserApprovalTool requires a non-empty 'prompt' string to show the user."
    )


async def test_overlong_prompt_is_refused(context: AgentToolExecutionContext) -> None:
    outcome = await UserApprovalTool(RecordingLogger()).execute(
        json.dumps({"prompt": "x" * 2_001}), context
    )
    assert not outcome.successful
    assert "too long" in (outcome.error_message or "")


async def test_wrong_type_is_described(context: AgentToolExecutionContext) -> None:
    outcome = await UserApprovalTool(RecordingLogger()).execute(
        '{"prompt": "Ok?", "destructive": "perhaps"}', context
    )
    assert not outcome.successful
    assert "'destructive'" in (outcome.error_message or "")
