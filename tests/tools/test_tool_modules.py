"""Tools from files and modules (APTIX_TOOL_MODULES, ``aptix serve --tools``)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from aptix.errors import PluginLoadError
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel, call, reply
from aptix.testing.server import ScriptedOpenAIServer
from tests.api.live import serve

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tools.py"


def _settings(tmp_path: Path, *modules: str) -> AptixSettings:
    return AptixSettings(
        data_dir=tmp_path, semantic_matching=False, tool_modules=list(modules), load_plugins=False
    )


async def test_a_file_s_tools_are_registered_offered_in_the_default_mode_and_run(
    tmp_path: Path,
) -> None:
    model = ScriptedModel.of(
        reply(None, call("word_count", {"text": "one two three"})), reply("Three words.")
    )
    async with open_runtime(_settings(tmp_path, str(EXAMPLE))) as runtime:
        assert {"word_count", "slugify"} <= set(runtime.registry.registered_tools)
        assert "word_count" in runtime.services.modes.tools_for_mode("general")
        assert "word_count" not in runtime.services.modes.tools_for_mode("calculation")
        created = await runtime.services.sessions.create_session(org="local", user="local")
        assert created.result is not None
        reasoner = runtime.reasoner(model)
        prepared = await reasoner.prepare(
            session_id=created.result.id, org="local", user="local", instruction="count"
        )
        result = await reasoner.run(prepared)
    assert "word_count" in model.offered_tools(0)
    assert result.text == "Three words."
    (counted,) = result.tool_calls
    assert json.loads(counted["resultJson"]) == {"words": 3, "characters": 13}


async def test_a_module_name_loads_too(tmp_path: Path) -> None:
    async with open_runtime(_settings(tmp_path, "tests.tools.sample_tools")) as runtime:
        assert len(runtime.registry.registered_tools) > 8  # the built-ins and the sample's


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (None, r"Tool file .*missing\.py does not exist"),
        ("def broken(:\n", r"Could not load tool file .*bad\.py: SyntaxError"),
        ("raise RuntimeError('no import')\n", r"bad\.py: RuntimeError: no import"),
        ("X = 1\n", r"No tools in .*bad\.py"),
        (
            "from aptix import AgentTool\n\nclass Bad(AgentTool):\n    TOOL_NAME = 'bad name'\n",
            r"Tool Bad in .*bad\.py breaks the tool contract",
        ),
    ],
)
async def test_a_bad_tool_file_stops_start_up_naming_the_file(
    tmp_path: Path, source: str | None, message: str
) -> None:
    path = tmp_path / ("missing.py" if source is None else "bad.py")
    if source is not None:
        path.write_text(source)
    with pytest.raises(PluginLoadError, match=message):
        async with open_runtime(_settings(tmp_path, str(path))):
            pass


def test_aptix_tool_modules_takes_a_comma_list_or_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_TOOL_MODULES", "a.py, pkg.tools")
    assert AptixSettings().tool_modules == ["a.py", "pkg.tools"]
    monkeypatch.setenv("APTIX_TOOL_MODULES", '["my tools/a,b.py"]')
    assert AptixSettings().tool_modules == ["my tools/a,b.py"]


def test_aptix_serve_tools_serves_a_decorated_function_in_a_turn(tmp_path: Path) -> None:
    script = [reply(None, call("slugify", {"text": "Hello, Tools From Files!"})), reply("Done.")]
    with (
        ScriptedOpenAIServer(script) as llm,
        serve(
            tmp_path,
            "--tools",
            str(EXAMPLE),
            APTIX_LLM_BASE_URL=llm.base_url,
            APTIX_LLM_MODEL="scripted",
            APTIX_SEMANTIC_MATCHING="false",
        ) as url,
    ):
        answer = httpx.post(f"{url}/v1/agent/execute", json={"instruction": "slug"}, timeout=60)
        listed = httpx.get(f"{url}/v1/tools", timeout=10).json()
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["text"] == "Done."
    assert body["toolCalls"][0]["resultJson"] == '"hello-tools-from-files"'
    assert "slugify" in json.dumps(listed)
