"""``aptix.llm.formats``: a strict schema is the caller's, and checking with it stays bounded.

Nothing is fetched for a ``$ref``, a schema's depth is capped, and its patterns run under
``regex`` with a time limit, in the ECMA-262 syntax JSON Schema specifies.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from aptix.llm.formats import MAX_SCHEMA_DEPTH, PATTERN_SECONDS, answer_problem, schema_problem


def strict(schema: Any) -> dict[str, Any]:
    """A strict ``json_schema`` format of ``schema``."""
    return {"type": "json_schema", "json_schema": {"name": "S", "schema": schema, "strict": True}}


class Listener:
    """An HTTP server on 127.0.0.1 standing in for an internal service; records its requests."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        paths = self.paths

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                paths.append(self.path)
                body = json.dumps({"const": "INTERNAL-SECRET"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def listener() -> Iterator[Listener]:
    served = Listener()
    thread = threading.Thread(target=served.server.serve_forever, daemon=True)
    thread.start()
    yield served
    served.server.shutdown()
    served.server.server_close()


def test_a_remote_ref_is_refused_and_never_fetched(listener: Listener) -> None:
    schema = {"type": "object", "properties": {"x": {"$ref": f"{listener.url}/creds.json"}}}
    problem = schema_problem(strict(schema))
    assert "outside the schema" in (problem or "")
    # Checked anyway (a turn stored before the check), it is unresolved, not fetched.
    assert answer_problem(strict(schema), '{"x": 1}') is None
    assert listener.paths == []


@pytest.mark.parametrize("ref", ["other.json", "other.json#/a", "//127.0.0.1:1/x", "/etc/x"])
def test_a_relative_ref_outside_the_schema_is_refused(ref: str) -> None:
    problem = schema_problem(strict({"properties": {"x": {"$ref": ref}}}))
    assert "outside the schema" in (problem or "")


def test_a_ref_under_a_remote_id_fetches_nothing(listener: Listener) -> None:
    # "#/nope" read against the subschema's $id names a URL: unresolved, never retrieved.
    schema = {
        "$id": f"{listener.url}/root.json",
        "properties": {"x": {"$id": f"{listener.url}/sub/", "$ref": "#/nope"}},
    }
    assert schema_problem(strict(schema)) is None
    assert answer_problem(strict(schema), '{"x": 2}') is None
    assert listener.paths == []


def test_local_refs_and_recursion_resolve() -> None:
    node = {"type": "object", "properties": {"k": {"$ref": "#/$defs/n"}, "v": {"type": "integer"}}}
    schema = {"$defs": {"n": node}, "$ref": "#/$defs/n"}
    assert schema_problem(strict(schema)) is None
    assert answer_problem(strict(schema), '{"k": {"k": {"v": 1}}}') is None
    problem = answer_problem(strict(schema), '{"k": {"k": {"v": "x"}}}')
    assert "$.k.k.v" in (problem or "")


def test_a_ref_inside_data_is_no_reference() -> None:
    schema = {"enum": [{"$ref": "http://example.invalid/x"}], "properties": {"enum": {}}}
    assert schema_problem(strict(schema)) is None


def test_ecma_patterns_are_valid_and_matched() -> None:
    letters = strict({"type": "string", "pattern": r"^\p{Lu}\p{Ll}+$"})
    assert schema_problem(letters) is None
    assert answer_problem(letters, '"Åse"') is None
    assert answer_problem(letters, '"åse"') is not None
    assert schema_problem(strict({"type": "string", "pattern": r"^(?<year>\d{4})$"})) is None
    assert schema_problem(strict({"pattern": r"\p{Extended_Pictographic}"})) is None
    refused = schema_problem(strict({"type": "string", "pattern": "("}))
    assert "is not a 'regex'" in (refused or "")


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": "^(a|a)+$"},
        {"type": "object", "patternProperties": {"^(a|a)+$": {}}, "additionalProperties": False},
        {"type": "object", "propertyNames": {"pattern": "^(a|a)+$"}},
    ],
)
def test_a_pattern_that_backtracks_without_end_is_unmet_within_its_time(schema: Any) -> None:
    hostile = "a" * 40 + "!"
    answer = json.dumps(hostile if schema.get("pattern") else {hostile: 1})
    started = time.monotonic()
    problem = answer_problem(strict(schema), answer)
    assert "could not be checked within" in (problem or "")
    # Unbounded, 2**40 ways to match would take hours; the bound is loose for a loaded machine
    # (two cores shared by four test workers took 4 s here).
    assert time.monotonic() - started < PATTERN_SECONDS + 30


def test_pattern_properties_with_unevaluated_properties_is_refused() -> None:
    schema = {"patternProperties": {"^a": {}}, "unevaluatedProperties": False}
    problem = schema_problem(strict(schema))
    assert "unevaluatedProperties" in (problem or "")


def test_additional_properties_still_reads_properties_and_patterns() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {}},
        "patternProperties": {r"^\p{Lu}": {"type": "integer"}},
        "additionalProperties": False,
    }
    assert answer_problem(strict(schema), '{"a": 1, "Ö": 2}') is None
    problem = answer_problem(strict(schema), '{"a": 1, "b": 2}')
    assert "'b' was unexpected" in (problem or "")
    assert answer_problem(strict(schema), '{"Ö": "x"}') is not None


def _nested(levels: int, keyword: str) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        if keyword == "properties":
            schema = {"type": "object", "properties": {"a": schema}}
        else:
            schema = {"type": "array", "items": schema}
    return schema


@pytest.mark.parametrize(("keyword", "levels"), [("properties", 93), ("items", 116)])
def test_a_schema_deeper_than_the_bound_is_refused(keyword: str, levels: int) -> None:
    problem = schema_problem(strict(_nested(levels, keyword)))
    assert f"more than {MAX_SCHEMA_DEPTH} levels" in (problem or "")


@pytest.mark.parametrize(("keyword", "levels"), [("properties", 31), ("items", 62)])
def test_a_schema_within_the_bound_is_checked(keyword: str, levels: int) -> None:
    assert schema_problem(strict(_nested(levels, keyword))) is None


def test_a_recursion_error_checking_the_schema_is_a_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import aptix.llm.formats as formats

    def exhausted(*_: Any) -> Any:
        raise RecursionError

    monkeypatch.setattr(formats, "best_match", exhausted)
    problem = schema_problem(strict({"type": "object"}))
    assert "nested more than" in (problem or "")


def test_an_answer_too_deep_to_check_is_unmet() -> None:
    tree = {"$ref": "#/$defs/t", "$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}}}
    problem = answer_problem(strict(tree), "[" * 900 + "]" * 900)
    assert "recursed too deeply" in (problem or "")


def test_a_ref_loop_is_refused_up_front() -> None:
    loop = {"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}, "$ref": "#/$defs/A"}
    assert "without end" in (schema_problem(strict(loop)) or "")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_standard_constants_are_not_json(constant: str) -> None:
    schema = {"type": "object", "properties": {"celsius": {"type": "number"}}}
    problem = answer_problem(strict(schema), f'{{"city": "Oslo", "celsius": {constant}}}')
    assert "is not JSON" in (problem or "")
    assert answer_problem(strict(schema), '{"celsius": 1e308}') is None


ROOT = "https://example.com/root.json"


@pytest.mark.parametrize(
    "schema",
    [
        # Relative to the root's $id, the ref names the resource $defs.item embeds.
        {
            "$id": ROOT,
            "properties": {"a": {"$ref": "item.json"}},
            "$defs": {"item": {"$id": "item.json", "type": "string"}},
        },
        {
            "$id": ROOT,
            "properties": {"a": {"$ref": f"{ROOT}#/$defs/A"}},
            "$defs": {"A": {"type": "string"}},
        },
        {
            "properties": {"a": {"$ref": "urn:x:item"}},
            "$defs": {"i": {"$id": "urn:x:item", "type": "string"}},
        },
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "id": ROOT,
            "properties": {"a": {"$ref": "b.json"}},
            "definitions": {"b": {"id": "b.json", "type": "string"}},
        },
        # A ref into an annotation makes its target a schema, checked like any other.
        {"properties": {"a": {"$ref": "#/x-kinds/text"}}, "x-kinds": {"text": {"type": "string"}}},
    ],
)
def test_a_ref_to_a_resource_the_schema_embeds_resolves(schema: Any) -> None:
    assert schema_problem(strict(schema)) is None
    assert answer_problem(strict(schema), '{"a": "x"}') is None
    assert "at $.a: 1 is not of type 'string'" in (answer_problem(strict(schema), '{"a": 1}') or "")


@pytest.mark.parametrize("keyword", ["x-source", "examples", "default", "const", "enum"])
def test_a_ref_in_an_annotation_or_data_is_no_reference(keyword: str) -> None:
    value: Any = {"$ref": "https://example.invalid/x.json"}
    if keyword in ("examples", "enum"):
        value = [value]
    schema = {"type": "object", "properties": {"a": {"type": "string", keyword: value}}}
    if keyword in ("const", "enum"):
        schema = {"type": "object", "properties": {"a": {keyword: value}}}
    assert schema_problem(strict(schema)) is None


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        # The meta-schema is not the caller's: known locally, but still outside the schema.
        ({"$ref": "https://json-schema.org/draft/2020-12/schema"}, "outside the schema"),
        ({"$id": ROOT, "properties": {"a": {"$ref": "other.json"}}}, "outside the schema"),
        ({"$ref": "#/x-e", "x-e": {"$ref": "https://example.invalid/x.json"}}, "outside"),
        ({"$ref": "#/x-e", "x-e": 5}, "names no schema"),
        ({"allOf": [{}], "properties": {"a": {"$ref": "#/allOf/x"}}}, "names no schema"),
    ],
)
def test_a_ref_leading_out_of_the_schema_or_to_no_schema_is_refused(
    schema: Any, words: str, listener: Listener
) -> None:
    assert words in (schema_problem(strict(schema)) or "")
    assert listener.paths == []


def union_answer(rows: int, pattern: str) -> tuple[dict[str, Any], str]:
    """A schema whose check takes time without patterns (a 10-way oneOf per row), and an answer."""
    kinds = [
        {
            "type": "object",
            "properties": {"kind": {"const": f"k{i}"}, "v": {"type": "integer"}},
            "required": ["kind", "v"],
            "additionalProperties": False,
        }
        for i in range(10)
    ]
    schema = {
        "type": "object",
        "properties": {
            "rows": {"type": "array", "items": {"oneOf": kinds}},
            "tag": {"type": "string", "pattern": pattern},
        },
    }
    answer = {"rows": [{"kind": f"k{n % 10}", "v": n} for n in range(rows)], "tag": "ok"}
    return schema, json.dumps(answer)


def test_only_matching_is_charged_to_the_pattern_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    import aptix.llm.formats as formats

    # The walk of 2,000 rows takes ~20 times this budget; the one pattern, microseconds.
    monkeypatch.setattr(formats, "PATTERN_SECONDS", 0.01)
    schema, answer = union_answer(2000, "^ok$")
    assert answer_problem(strict(schema), answer) is None
    schema, answer = union_answer(2000, "^no$")
    assert "'ok' does not match '^no$'" in (answer_problem(strict(schema), answer) or "")


def test_the_pattern_budget_is_for_all_matches_of_an_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import aptix.llm.formats as formats

    # Each match backtracks for some milliseconds, under the budget; together they are over.
    monkeypatch.setattr(formats, "PATTERN_SECONDS", 0.1)
    schema = {"type": "array", "items": {"type": "string", "pattern": "^(a|a)+$"}}
    answer = json.dumps(["a" * 16 + "!"] * 200)
    started = time.monotonic()
    problem = answer_problem(strict(schema), answer)
    assert "could not be checked within 0.1 s" in (problem or "")
    assert time.monotonic() - started < 1
