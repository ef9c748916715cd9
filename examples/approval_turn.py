"""A full turn with a scripted model: a server tool, a client approval, a resume.

Run it with ``python examples/approval_turn.py``. A scripted OpenAI-compatible server on
127.0.0.1 stands in for the model; Aptix talks to it through the real ``openai`` client.
"""

from __future__ import annotations

import asyncio
import json
import tempfile

from aptix.reasoner import ToolResultInput
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import call, reply
from aptix.testing.server import ScriptedOpenAIServer


async def main() -> None:
    """Run the turn and print what happens at each step."""
    script = [
        reply(None, call("agent_calculator", {"expression": "19.99 * 3"}, id="calc")),
        reply(
            "The total is 59.97.",
            call(
                "request_user_approval",
                {"prompt": "Charge 59.97 to the card on file?", "action": "charge"},
                id="approve",
            ),
        ),
        reply("Done: the card was charged 59.97."),
    ]
    with ScriptedOpenAIServer(script) as server:
        settings = AptixSettings(
            data_dir=tempfile.mkdtemp(),
            llm_base_url=server.base_url,
            llm_model="scripted",
            load_plugins=False,
        )
        async with open_runtime(settings) as runtime:
            created = await runtime.services.sessions.create_session(org="local", user="local")
            assert created.result is not None
            reasoner = runtime.reasoner()
            first = await reasoner.execute(
                session_id=created.result.id,
                org="local",
                user="local",
                instruction="Buy three of those for me.",
            )
            print(f"1. {first.kind}: {first.text}")
            for tool_call in first.tool_calls:
                print(f"   {tool_call['name']} -> {tool_call['resultJson']}")
            pending = [c for c in first.tool_calls if c["requiresClientExecution"]]
            prompt = json.loads(pending[0]["resultJson"])["prompt"]
            print(f"2. The client asks the person: {prompt} -> approve")
            final = await reasoner.execute(
                session_id=created.result.id,
                org="local",
                user="local",
                tool_results=[ToolResultInput(pending[0]["callId"], '{"approved": true}')],
            )
            print(f"3. {final.kind}: {final.text}")
            assert final.kind == "ok"
        server.assert_complete()


if __name__ == "__main__":
    asyncio.run(main())
