"""A warning about a response the caps cut quotes the call ids the model wrote bounded and on
one line, in the turn's record and in its span event alike."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from aptix.reasoner.caps import ResponseCaps
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.telemetry import CAPPED_EVENT, OtelTracing
from aptix.testing import ScriptedModel, call, reply

#: A call id the model wrote: far too long, with a terminal escape and a line break in it.
HOSTILE_ID = "id\x1b[2J\nFORGED" + "x" * 20_000


def _plain(text: str) -> bool:
    return not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in text)


def test_each_repeated_id_is_quoted_escaped_and_cut() -> None:
    ids = [f"{n}\x07{'y' * 5_000}" for n in range(7)]
    response = reply(None, *(call("agent_calculator", {}, id=i) for i in ids + ids))
    capped = ResponseCaps().apply(response)
    [warning] = capped.warnings
    # Every call is kept in the response; the repeats are refused (review r7 F2, round 73).
    assert len(capped.response.tool_calls) == 14
    assert sorted(capped.refused) == list(range(7, 14))
    for why in capped.refused.values():
        assert len(why) <= 500
        assert _plain(why)
    assert len(warning) <= 500
    assert _plain(warning)
    assert "'0\\x07yyy" in warning  # escaped, as repr shows it
    assert warning.endswith("7 repeated call(s) were refused and not run.")  # none of it cut


async def test_a_hostile_repeated_call_id_is_bounded_in_the_record_and_the_span(
    settings: AptixSettings,
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()  # no attribute limits: what is bounded, Aptix bounded
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel.of(
        reply(
            None,
            call("agent_calculator", {"expression": "1+1"}, id=HOSTILE_ID),
            call("agent_calculator", {"expression": "2+2"}, id=HOSTILE_ID),
        ),
        reply("Done."),
    )
    async with open_runtime(settings, tracing=OtelTracing(provider)) as runtime:
        created = await runtime.services.sessions.create_session(org="acme", user="ann")
        assert created.result is not None
        result = await runtime.reasoner(model).execute(
            session_id=created.result.id, org="acme", user="ann", instruction="go"
        )
        [stored] = await runtime.turns.list_turns(created.result.id, "acme")
    assert result.kind == "ok"
    for warnings in (result.warnings, stored.warnings):
        [warning] = warnings
        assert len(warning) <= 500
        assert _plain(warning)
        assert "\\x1b[2J\\nFORGED" in warning
    [turn] = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent aptix"]
    [capped] = [e for e in turn.events if e.name == CAPPED_EVENT]
    reason = str((capped.attributes or {})["reason"])
    assert reason == result.warnings[0]
