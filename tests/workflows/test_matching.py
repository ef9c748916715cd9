from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aptix.workflows.loader import load_builtin
from aptix.workflows.matching import routing as routing_module
from aptix.workflows.matching.combined import Candidates, WorkflowMatcher, decide
from aptix.workflows.matching.cues import CUES, message_cues
from aptix.workflows.matching.explicit import explicit_workflow_id
from aptix.workflows.matching.form import FormModel, form_grams
from aptix.workflows.matching.fusion import FusionModel
from aptix.workflows.matching.lexical import MAX_TYPO_LOOKUPS, LexicalMatcher, MatchDocument
from aptix.workflows.matching.routing import (
    BUILTIN_VETO,
    GATE_THRESHOLD,
    LEXICAL_RANK,
    SEMANTIC_WORD_VETO,
    WEAK_CHAR,
    BuiltinModel,
    Routing,
    default_routing,
)
from aptix.workflows.matching.semantic import OnnxEmbedder, SemanticMatcher, load_embedder
from aptix.workflows.matching.text import readable, stem, terms
from aptix.workflows.registry import WorkflowRegistry
from tests.workflows.conftest import make_manifest


@pytest.fixture(scope="module")
def onnx_embedder() -> OnnxEmbedder:
    return load_embedder()


class HashingEmbedder:
    """Bag of stemmed words hashed into 64 dimensions: a deterministic stand-in model."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            for term in terms(text) or ["<empty>"]:
                out[row, int(hashlib.sha1(term.encode()).hexdigest(), 16) % 64] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


def test_stemming_meets_word_forms() -> None:
    assert stem("publishing") == stem("published") == stem("publishes") == "publish"
    assert terms("Creating new Workflows!") == terms("create new workflow")
    assert terms("the and of") == []


def test_lexical_ranks_by_overlap_and_forgives_typos() -> None:
    matcher = LexicalMatcher(
        [
            MatchDocument("reports", "write the monthly sales report"),
            MatchDocument("travel", "book a flight to a conference"),
        ]
    )
    assert matcher.match("I need to write our sales report")[0][0] == "reports"
    assert matcher.match("book a fligth")[0][0] == "travel"
    assert matcher.match("completely unrelated words") == []


def test_typo_lookups_stop_after_a_message_s_first_unknown_terms() -> None:
    matcher = LexicalMatcher([MatchDocument("books", "reconcile the supplier invoices")])
    # Made-up words the index lacks, each distinct, each long enough to be a typo.
    pasted = " ".join(
        f"zq{chr(97 + i // 26)}{chr(97 + i % 26)}vvx" for i in range(MAX_TYPO_LOOKUPS)
    )
    assert "invoic" in matcher.query_terms("suplier invoicse")
    # Past the cap the typo is not looked up, though the lookup above is remembered: what a
    # message matches does not depend on the messages before it.
    late = matcher.query_terms(f"{pasted} suplier invoicse")
    assert "invoic" not in late
    assert "invoic" in matcher.query_terms(f"suplier invoicse {pasted}")
    assert matcher.known_share(f"{pasted} invoicse") == 0.0
    assert matcher.shared_terms(f"{pasted} invoicse", "books") == []
    assert matcher.shared_terms(f"invoicse {pasted}", "books") == ["invoicse"]


def test_whole_phrases_of_common_words_still_match() -> None:
    matcher = LexicalMatcher([MatchDocument("greet", "what can you do")])
    assert matcher.match("so, what can you do?") == [("greet", pytest.approx(0.9))]


@given(st.text(max_size=200))
def test_scores_stay_in_range_for_any_message(message: str) -> None:
    matcher = WorkflowMatcher()
    matcher.rebuild([make_manifest("a"), make_manifest("b_c", userIntentPatterns=["b c d e"])])
    decision = matcher.decide(message)
    assert 0.0 <= decision.gate <= 1.0
    for _, score in [*decision.ranked, *decision.matches(10)]:
        assert 0.0 <= score <= 1.0


_SEEDED_SCORES = """
import random
from aptix.workflows.matching.lexical import MAX_TYPO_LOOKUPS, LexicalMatcher, MatchDocument
words = [f"{a}{b}ing" for a in "bcdfghjklm" for b in ("ar", "el", "ist", "ont", "uv")]
rng = random.Random(7)
docs = [MatchDocument(f"w{i}", " ".join(rng.sample(words, 12))) for i in range(80)]
matcher = LexicalMatcher(docs)
for i in range(40):
    message = " ".join(rng.sample(words, 6))
    print([(owner, score.hex()) for owner, score in matcher.match(message)])
"""


def test_lexical_scores_do_not_depend_on_the_hash_seed() -> None:
    # Fitted weights are refitted from these scores; they must not move with PYTHONHASHSEED.
    runs = [
        subprocess.run(
            [sys.executable, "-c", _SEEDED_SCORES],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    ]
    assert runs[0].count("w") > 40
    assert runs[0] == runs[1] == runs[2]


def test_the_gate_decides_acceptance_and_the_ranker_the_order() -> None:
    matcher = WorkflowMatcher()
    matcher.rebuild(
        [
            make_manifest("create_report", userIntentPatterns=["create a sales report"]),
            make_manifest("greet", userIntentPatterns=["hello there", "introduce yourself"]),
        ]
    )
    accepted = matcher.decide("please create the monthly sales report")
    assert accepted.accepted
    assert accepted.ranked[0][0] == "create_report"
    assert matcher.rank("please create the monthly sales report")[0][1] >= GATE_THRESHOLD
    for chat in ("what's the weather", "how are you today?", "don't create a report"):
        assert matcher.rank(chat) == [], chat


def _fixed_routing(accept: bool) -> Routing:
    """The shipped semantic routing with a ranker that orders by the first column and a gate
    that accepts (or rejects) everything: the built-in model's effect alone is left."""
    shipped = default_routing(True)
    rank = shipped.ranker.features
    ranker = FusionModel(
        rank, (1.0,) + (0.0,) * (len(rank) - 1), 0.0, (0.0,) * len(rank), (1.0,) * len(rank)
    )
    gate_names = shipped.gate.features
    zeros = (0.0,) * len(gate_names)
    gate = FusionModel(gate_names, zeros, 5.0 if accept else -5.0, zeros, (1.0,) * len(gate_names))
    assert shipped.builtin is not None
    builtin = BuiltinModel(frozenset({"greet_user"}), shipped.builtin.model)
    return replace(shipped, ranker=ranker, gate=gate, builtin=builtin)


@pytest.mark.parametrize(
    ("p_builtin", "stated", "accept", "expected"),
    [
        (0.5, None, True, ["greet_user", "order_laptop"]),
        (BUILTIN_VETO / 2, None, True, ["order_laptop"]),
        (BUILTIN_VETO / 2, "greet_user", True, ["greet_user", "order_laptop"]),
        (BUILTIN_VETO / 2, None, False, ["order_laptop"]),
    ],
)
def test_built_in_candidates_leave_when_the_built_in_model_is_all_but_sure(
    p_builtin: float, stated: str | None, accept: bool, expected: list[str]
) -> None:
    routing = _fixed_routing(accept)
    width = len(routing.ranker.features)
    features = np.zeros((2, width))
    features[:, 0] = [0.9, 0.4]  # the greeting workflow ranks first
    message = np.zeros(len(routing.gate.features) - 2)
    message[0] = 1.0  # a shared word: not the no-evidence floor
    found = Candidates(["greet_user", "order_laptop"], features, message, stated, p_builtin)
    decision = decide(routing, found)
    assert [w for w, _ in decision.ranked] == expected
    assert decision.accepted == accept


@pytest.mark.parametrize(
    ("p_words", "expected"),
    [(SEMANTIC_WORD_VETO / 2, ["order_laptop"]), (SEMANTIC_WORD_VETO * 2, ["greet_user"])],
)
def test_with_the_semantic_extra_the_word_model_can_also_send_a_first_built_in_away(
    p_words: float, expected: list[str]
) -> None:
    # The embedding model is sure the message is for a built-in; the word model decides.
    shipped = _fixed_routing(True)
    assert shipped.builtin is not None
    words = default_routing(True).builtin
    assert words is not None
    assert words.words is not None
    routing = replace(shipped, builtin=replace(shipped.builtin, words=words.words))
    features = np.zeros((2, len(routing.ranker.features)))
    features[:, 0] = [0.9, 0.4]
    message = np.ones(len(routing.gate.features) - 2)
    found = Candidates(["greet_user", "order_laptop"], features, message, None, 0.9, p_words)
    assert [w for w, _ in decide(routing, found).ranked][:1] == expected


@pytest.mark.parametrize(("char", "expected"), [(0.1, ["order_laptop"]), (0.3, ["greet_user"])])
def test_without_a_model_a_first_built_in_leaves_when_its_character_grams_barely_meet(
    char: float, expected: list[str]
) -> None:
    routing = replace(_fixed_routing(True), builtin=BuiltinModel(frozenset({"greet_user"})))
    features = np.zeros((2, len(routing.ranker.features)))
    features[:, 0] = [0.9, 0.4]
    features[0, LEXICAL_RANK.index("char")] = char
    message = np.ones(len(routing.gate.features) - 2)
    found = Candidates(["greet_user", "order_laptop"], features, message)
    assert [w for w, _ in decide(routing, found).ranked][:1] == expected
    assert WEAK_CHAR == 0.15  # the two cases sit either side of it


def test_only_built_in_candidates_vetoed_leave_nothing_to_match() -> None:
    routing = _fixed_routing(True)
    features = np.zeros((1, len(routing.ranker.features)))
    message = np.ones(len(routing.gate.features) - 2)
    found = Candidates(["greet_user"], features, message, None, 0.0)
    assert decide(routing, found).matches(3) == []
    # Without the built-in model (the lexical path) nothing is dropped.
    lexical = replace(routing, builtin=None)
    assert [w for w, _ in decide(lexical, found).matches(3)] == ["greet_user"]


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Use workflow: create_ddr", "create_ddr"),
        ("use workflow create-ddr please", "create_ddr"),
        ("Start the code-refinement workflow.", "code_refinement"),
        ("can you start the code refinement workflow for me", "code_refinement"),
        ("workflow: `create_ddr`", "create_ddr"),
        ("start a new workflow", None),
        ("Use workflow: xyz", None),
        ("create a ddr", None),
        # A naming the clause turns down is no naming; a later one in the message still is.
        ("don't use workflow create_ddr", None),
        ("Do not use workflow: create_ddr", None),
        ("please don’t start the code refinement workflow", None),
        ("without running the create_ddr workflow", None),
        ("don't use workflow: create_ddr, use workflow: code_refinement", "code_refinement"),
        ("Not now. Start the code-refinement workflow", "code_refinement"),
        ("notes: use workflow: create_ddr", "create_ddr"),
        # An article before the name, and a second naming in the same clause.
        ("use workflow: the create_ddr", "create_ddr"),
        ("start workflow: the code refinement", "code_refinement"),
        ("use workflow: nosuch or use workflow: create_ddr", "create_ddr"),
    ],
)
def test_explicit_initiation_forms(message: str, expected: str | None) -> None:
    assert explicit_workflow_id(message, ["create_ddr", "code_refinement"]) == expected


def test_explicit_naming_and_lookup_follow_each_change_of_the_served_set() -> None:
    # The registry keys its ids once per revision: every publish and removal must show.
    registry = WorkflowRegistry([make_manifest("create_ddr")])
    assert registry.match("use workflow: create-ddr")[0].why == "named explicitly"
    assert registry.get("Create-DDR") is not None
    registry.publish(make_manifest("code_refinement"))
    assert registry.match("start the code refinement workflow")[0].workflow_id == (
        "code_refinement"
    )
    registry.publish(make_manifest("team_only"), org="acme")
    assert registry.get("TEAM-ONLY", "acme") is not None
    assert registry.get("TEAM-ONLY") is None
    named = registry.match("use workflow: team only", org="other")
    assert all(m.workflow_id != "team_only" for m in named)
    assert registry.match("use workflow: team only", org="acme")[0].why == "named explicitly"
    assert registry.remove("create_ddr")
    assert registry.get("Create-DDR") is None
    assert all(m.why != "named explicitly" for m in registry.match("use workflow: create-ddr"))


@pytest.mark.parametrize(
    "message",
    ["Use workflow: zzz_unknown", "run the workflow = nosuch", "use workflow: the nosuch"],
)
async def test_asking_for_an_id_no_workflow_has_matches_nothing(message: str) -> None:
    # It used to match whichever workflow shared the words "use" and "workflow".
    registry = WorkflowRegistry(
        [
            make_manifest(
                "use_workflow_helper",
                userIntentPatterns=["use a workflow", "run the workflow for me"],
            )
        ]
    )
    assert registry.match(message) == []
    assert await registry.match_async(message) == []


@pytest.mark.parametrize(
    "message", ["use a workflow please", "here is my workflow: use a workflow for me"]
)
def test_words_about_workflows_that_name_no_id_still_go_to_inference(message: str) -> None:
    registry = WorkflowRegistry(
        [
            make_manifest(
                "use_workflow_helper",
                userIntentPatterns=["use a workflow", "run the workflow for me"],
            )
        ]
    )
    assert registry.match(message)[0].workflow_id == "use_workflow_helper"


def test_the_fusion_model_fits_a_separable_signal_and_round_trips() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(400, len(LEXICAL_RANK)))
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(float)
    model = FusionModel.fit(LEXICAL_RANK, x, y)
    p = model.probability(x)
    assert ((p >= 0.5) == (y == 1)).mean() > 0.95
    assert model.weights[0] > model.weights[1] > abs(model.weights[2])
    again = FusionModel.from_json(model.to_json())
    assert np.allclose(again.probability(x), p)
    assert model.probability(np.zeros((0, len(LEXICAL_RANK)))).shape == (0,)


def test_a_bounded_weight_stays_at_or_above_zero_and_the_others_are_refitted() -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(size=(600, 3))
    # The second feature truly counts against the label; bounded, it can only drop out.
    y = (x[:, 0] - x[:, 1] + 0.3 * rng.normal(size=600) > 0).astype(float)
    free = FusionModel.fit(("a", "b", "c"), x, y)
    bounded = FusionModel.fit(("a", "b", "c"), x, y, nonnegative={"a", "b"})
    assert free.weights[1] < -1.0
    assert bounded.weights[1] == 0.0
    assert bounded.weights[0] > 1.0
    # An inactive bound changes nothing: the optimum already satisfies it.
    only_a = FusionModel.fit(("a", "b", "c"), x, y, nonnegative={"a"})
    assert np.allclose(only_a.weights, free.weights, atol=1e-6)
    # The bounded optimum: no feasible nudge of any weight lowers the loss.
    z = np.hstack([(x - bounded.mean) / bounded.scale, np.ones((600, 1))])

    def loss(beta: np.ndarray) -> float:
        logits = z @ beta
        penalty = 0.5 * float((beta[:-1] ** 2).sum())
        return float((np.logaddexp(0.0, logits) - y * logits).sum()) + penalty

    best = np.asarray([*bounded.weights, bounded.bias])
    for k in range(4):
        for step in (1e-3, -1e-3):
            nudged = best.copy()
            nudged[k] += step
            if k in (0, 1) and nudged[k] < 0:
                continue
            assert loss(nudged) >= loss(best) - 1e-9


def cues_of(text: str) -> set[str]:
    """The names of the cues that fire on ``text``."""
    return {name for name, on in zip(CUES, message_cues(text), strict=True) if on}


def test_message_cues_flag_mentions_that_ask_for_something_else() -> None:
    assert "negated" in cues_of("don't create a DDR, just explain what one is")
    assert "info_question" in cues_of("what does DDR stand for?")
    assert "info_question" in cues_of("who fixed the login bug last week?")
    assert cues_of("create a new DDR for caching") == {"request"}
    assert cues_of("could you book me a room?") == {"request", "question"}
    assert "small_talk" in cues_of("how are you doing?")
    assert "question" in cues_of("is the build green?")
    assert "past" in cues_of("the migration we ran back in 2019 went fine")
    assert "opinion" in cues_of("code reviews are so friendly here")


def test_form_keeps_function_words_and_hides_the_rest() -> None:
    # Same form, no shared content word; same content, another form.
    assert form_grams("pls open a ticket for the printer") == form_grams(
        "pls book a room for the offsite"
    )
    assert "<s> pls X" in form_grams("pls open a ticket")
    assert "Xed" in form_grams("someone opened a ticket")
    assert form_grams("pls open a ticket") != form_grams("don't open a ticket")
    # Nothing of the content survives: the model cannot learn a catalog's words.
    assert not any("ticket" in gram for gram in form_grams("pls open a ticket"))


def test_form_model_weighs_what_requests_share_against_what_talk_shares() -> None:
    asks = ["pls open a ticket", "pls book a room", "pls send the invoice", "i need a desk"]
    talk = ["last year we opened a ticket", "we liked the room", "we once sent an invoice"]
    model = FormModel.fit(asks + talk, [True] * 4 + [False] * 3)
    assert model.weights["<s> pls"] > 0 > model.weights["we"]
    # Seen in fewer than three messages: no weight (a catalog's quirk, not a form).
    assert "i need" not in model.weights
    assert model.score("pls order the chairs") > model.score("we once ordered the chairs")
    assert FormModel.from_json(model.to_json()).score("pls do it") == pytest.approx(
        model.score("pls do it"), abs=1e-5
    )


@pytest.mark.parametrize(
    ("ask", "talk"),
    [
        ("please set up a meeting room for Thursday", "the meeting room was freezing on Thursday"),
        ("can you renew my parking permit", "how long does a parking permit usually last?"),
        ("I need the quarterly figures sent to Dana", "don't send the quarterly figures to Dana"),
    ],
)
def test_the_shipped_form_model_tells_a_request_from_talk(ask: str, talk: str) -> None:
    # The score's zero is not the gate's threshold (the gate weighs it with the cues): compare.
    form = default_routing(False).form
    assert form is not None
    assert form.score(ask) > form.score(talk)


def test_a_configuration_kept_from_an_earlier_fit_keeps_its_own_form_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = json.loads(routing_module.WEIGHTS_FILE.read_text(encoding="utf-8"))
    own = FormModel.fit(["open the file", "nice weather"] * 3, [True, False] * 3)
    payload["lexical"]["form"] = own.to_json()
    weights = tmp_path / "routing.json"
    weights.write_text(json.dumps(payload), encoding="utf-8")
    monkeypatch.setattr(routing_module, "WEIGHTS_FILE", weights)
    default_routing.cache_clear()
    try:
        lexical, semantic = default_routing(False).form, default_routing(True).form
    finally:
        default_routing.cache_clear()
    assert lexical is not None
    assert semantic is not None
    assert lexical.to_json() == own.to_json()
    assert semantic.to_json() == payload["form"]


def test_matches_say_why() -> None:
    registry = WorkflowRegistry(
        [make_manifest("create_report", userIntentPatterns=["create a sales report"])],
        matcher=WorkflowMatcher(SemanticMatcher(HashingEmbedder())),
    )
    [row] = registry.match("please create the sales report")
    wire = row.to_wire()
    assert set(wire) == {"workflowId", "title", "matchScore", "runnable", "why"}
    assert "sales" in wire["why"]
    assert "report" in wire["why"]
    assert 'closest to "create a sales report"' in wire["why"]
    [explicit] = registry.match("use workflow: create_report")
    assert (explicit.match_score, explicit.why) == (1.0, "named explicitly")


@pytest.mark.parametrize(
    "message",
    [
        "",
        "   \n\t ",
        "x" * 100_000,
        "the weather was lovely on our walk. " * 3_000,
        "今天天气怎么样",
        "Как дела?",
        "مرحبا كيف حالك",
        "👍🎉🎉",
        "\u0000\u200b",
        "🙂" * 5000,
        "?!...,;:",
        "--- *** ---",
        "\ud800",
        "\udfff\ud800 \U0001f642",
    ],
)
@pytest.mark.parametrize("semantic", [False, True])
def test_bad_input_gets_an_empty_list_not_an_exception(
    message: str, semantic: bool, onnx_embedder: OnnxEmbedder
) -> None:
    matcher = WorkflowMatcher(SemanticMatcher(onnx_embedder) if semantic else None)
    registry = WorkflowRegistry(
        [make_manifest("create_report"), make_manifest("plan_trip")], matcher=matcher
    )
    assert registry.match(message) == []


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[31mred\x1b[0m", "red"),
        ("\x9b1;32mgreen\x9b0m", "green"),
        ("\x1b]0;a title\x07hello", "hello"),
        ("\x1b]8;;https://x.test\x1b\\link\x1b]8;;\x1b\\ text", "link text"),
        ("\x1bcreset", "reset"),
        ("\x1b]never ends", ""),
        ("cut \x1b[3", "cut "),
        ("tab\tand\nline", "tab\tand\nline"),
        ("bell\x07 and\x00nul", "bell  and nul"),
        ("plain, printable text", "plain, printable text"),
        ("cre\u200bate a work\u00adflow\ufeff", "create a workflow"),
        ("\u202eevil\u202c name", "evil name"),
    ],
)
def test_matching_reads_what_a_terminal_would_show(raw: str, shown: str) -> None:
    assert readable(raw) == shown


def test_a_long_run_of_unterminated_escapes_is_read_in_linear_time() -> None:
    # Negated classes, not lazy dots: 100,000 unterminated OSC openers are one pass.
    assert readable("\x1b]x" * 100_000) == ""


@pytest.mark.parametrize("semantic", [False, True])
def test_a_colour_code_is_not_a_number_to_calculate_with(
    semantic: bool, onnx_embedder: OnnxEmbedder
) -> None:
    # "\x1b[31mred" once tokenised as "31mred": digits, so the calculation workflow (0.79).
    builtin = [item.manifest for item in load_builtin()[0]]
    matcher = WorkflowMatcher(SemanticMatcher(onnx_embedder) if semantic else None)
    registry = WorkflowRegistry(builtin, matcher=matcher)
    assert registry.match("\x1b[31mred\x1b[0m") == []
    [first, *_] = registry.match("\x1b[1mwork out 15% of 240\x1b[0m")
    assert first.workflow_id == "guided_calculation"


@pytest.mark.parametrize("noise", ["\ud800", "\x00", "\x1b[2J", "[bold]", "<script>"])
def test_a_request_wrapped_in_hostile_text_still_matches(
    noise: str, onnx_embedder: OnnxEmbedder
) -> None:
    # JSON can carry a lone surrogate; the tokenizer refuses one, so the encoder replaces it.
    registry = WorkflowRegistry(
        [make_manifest("create_report"), make_manifest("plan_trip")],
        matcher=WorkflowMatcher(SemanticMatcher(onnx_embedder)),
    )
    [first, *_] = registry.match(f"{noise} create a report {noise}")
    assert first.workflow_id == "create_report"


def test_semantic_embeddings_are_recomputed_only_for_changed_workflows() -> None:
    embedder = HashingEmbedder()
    registry = WorkflowRegistry(
        [make_manifest("create_report"), make_manifest("plan_trip")],
        matcher=WorkflowMatcher(SemanticMatcher(embedder)),
    )
    registry.match("please create report")
    semantic = registry.matcher.semantic
    assert semantic is not None
    first = semantic.encoded_texts
    assert first == 6  # one pattern, the title and the description of each

    registry.match("please plan trip")  # nothing changed: no document is encoded again
    assert semantic.encoded_texts == first

    registry.publish(make_manifest("plan_trip", userIntentPatterns=["organise a journey"]))
    registry.match("organise a journey")
    assert semantic.encoded_texts == first + 1
    assert embedder.batches[-2] == ["organise a journey"]


def test_semantic_query_embeddings_are_cached() -> None:
    embedder = HashingEmbedder()
    matcher = SemanticMatcher(embedder, [MatchDocument("a", "alpha beta")])
    matcher.match("alpha")
    matcher.match("alpha")
    assert embedder.batches == [["alpha beta"], ["alpha"]]


def test_semantic_match_orders_by_similarity() -> None:
    matcher = SemanticMatcher(
        HashingEmbedder(),
        [
            MatchDocument("a", "alpha beta"),
            MatchDocument("b", "gamma delta"),
            MatchDocument("a", "epsilon"),
        ],
    )
    ranked = matcher.match("gamma delta", limit=2)
    assert [owner for owner, _ in ranked] == ["b", "a"]
    assert ranked[0][1] == pytest.approx(1.0, abs=1e-5)
    assert matcher.rank("gamma", 1, also=["a"]).keys() == {"a", "b"}


def test_the_centroid_prefilter_agrees_with_exact_scoring(monkeypatch: pytest.MonkeyPatch) -> None:
    import aptix.workflows.matching.semantic as semantic_module

    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta", "zeta", "iota"]
    docs = [
        MatchDocument(
            f"w{i:03d}", f"{words[i % 10]} {words[(i * 3) % 10]} {words[(i * 7) % 10]} {j}"
        )
        for i in range(120)
        for j in range(3)
    ]
    exact = SemanticMatcher(HashingEmbedder(), docs)
    monkeypatch.setattr(semantic_module, "PREFILTER_DOCUMENTS", 10)
    monkeypatch.setattr(semantic_module, "PREFILTER_WORKFLOWS", 120)
    filtered = SemanticMatcher(HashingEmbedder(), docs)
    for query in ("alpha beta", "omega kappa 2", "zeta"):
        want = exact.rank(query, 5, also=["w007"])
        got = filtered.rank(query, 5, also=["w007"])
        # Ties may resolve to different owners; the scores and the named owner must agree.
        assert sorted(got.values()) == pytest.approx(sorted(want.values()), abs=1e-5)
        assert got["w007"] == pytest.approx(want["w007"], abs=1e-5)
