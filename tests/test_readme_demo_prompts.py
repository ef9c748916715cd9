"""The README's demo prompts work as typed, in the README's order (review r2, F4).

They switched to the calculation mode before asking for approval, which that mode does not
offer: the last prompt was answered "not offered in this mode".
"""

from __future__ import annotations

import re
from pathlib import Path

from aptix.llm.demo import _CAPABILITIES, LABEL
from aptix.reasoner import ToolResultInput
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings

README = Path(__file__).resolve().parents[1] / "README.md"


def _readme_prompts() -> list[str]:
    text = " ".join(README.read_text().split())
    found = re.search(r"--demo`: ask it to (.*?)\. The server", text)
    assert found, "the README's demo sentence moved"
    return re.findall(r"`([^`]+)`", found.group(1))


async def test_the_readme_demo_prompts_each_call_their_tool_in_order(tmp_path: Path) -> None:
    prompts = _readme_prompts()
    assert len(prompts) == 5
    # The demo's own list (its answer to anything else) is the same tour in the same order.
    assert _CAPABILITIES.split(" · ") == prompts
    settings = AptixSettings(data_dir=tmp_path, semantic_matching=False, llm_model="demo")
    async with open_runtime(settings) as runtime:
        created = await runtime.services.sessions.create_session(org="local", user="local")
        assert created.result is not None
        sid = created.result.id
        reasoner = runtime.reasoner()
        for prompt in prompts:
            prepared = await reasoner.prepare(
                session_id=sid, org="local", user="local", instruction=prompt
            )
            result = await reasoner.run(prepared)
            assert result.tool_calls, (prompt, result.text)
            assert "not offered" not in (result.text or ""), prompt
            if result.kind == "tool-only":  # the approval: answered as the chat would
                (call,) = result.tool_calls
                answer = ToolResultInput(call["callId"], '{"approved": true}')
                prepared = await reasoner.prepare(
                    session_id=sid, org="local", user="local", tool_results=[answer]
                )
                result = await reasoner.run(prepared)
            assert result.kind == "ok", (prompt, result)
            assert (result.text or "").startswith(LABEL)
