"""The lexical path's built-in model: a sparse logistic model over a message's words."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from aptix.workflows.loader import load_builtin
from aptix.workflows.matching.combined import Candidates, WorkflowMatcher, decide
from aptix.workflows.matching.routing import (
    LEXICAL_BUILTIN_VETO,
    LEXICAL_RANK,
    BuiltinModel,
    default_routing,
)
from aptix.workflows.matching.words import WordModel, word_features
from aptix.workflows.registry import WorkflowRegistry
from bench.match_eval import fit_builtin_words
from tests.workflows.matchset import training_sets


def test_features_are_terms_words_and_bigrams() -> None:
    assert word_features("Please work out the totals") == {
        "t:work",
        "t:total",
        "w:please",
        "w:work",
        "w:out",
        "w:the",
        "w:totals",
        "b:please_work",
        "b:work_out",
        "b:out_the",
        "b:the_totals",
    }


@pytest.mark.parametrize("text", ["", "   ", "🙂🙂", "?!…", "日本語のメッセージ"])
def test_a_message_without_words_gets_the_bias_alone(text: str) -> None:
    model = WordModel({"w:hello": 3.0}, -2.0)
    assert word_features(text) == frozenset()
    assert model.probability(text) == pytest.approx(1 / (1 + math.exp(2.0)))


def test_the_probability_is_the_sigmoid_of_the_present_weights_and_survives_json() -> None:
    model = WordModel({"w:hello": 3.0, "b:hello_there": 1.5, "t:invoic": -4.0}, -2.0)
    assert model.probability("hello there") == pytest.approx(1 / (1 + math.exp(-2.5)))
    # Far past the float range of exp() either way: no overflow, just 0 or 1.
    assert WordModel({"w:hi": 1e4}, 0.0).probability("hi") == 1.0
    assert WordModel({"w:hi": -1e4}, 0.0).probability("hi") == 0.0
    again = WordModel.from_json(json.loads(json.dumps(model.to_json())))
    assert again.probability("hello there, invoice") == pytest.approx(
        model.probability("hello there, invoice")
    )
    builtin = BuiltinModel(frozenset({"greet_user"}), words=model)
    assert BuiltinModel.from_json(builtin.to_json()) == builtin


def test_the_shipped_sum_reproduces_scikit_learns_probabilities() -> None:
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    item = training_sets()[1]
    texts = [row.message for row in item.rows]
    fitted = fit_builtin_words(texts, item.rows)
    assert fitted.words is not None
    ids = fitted.ids
    vectoriser = CountVectorizer(analyzer=lambda t: sorted(word_features(t)), binary=True, min_df=2)
    x = vectoriser.fit_transform(texts)
    reference = LogisticRegression(C=1.0, max_iter=2000).fit(
        x, [r.expected in ids for r in item.rows]
    )
    expected = reference.predict_proba(x)[:, 1]
    got = np.asarray([fitted.words.probability(t) for t in texts])
    assert np.allclose(got, expected, atol=1e-9)
    # It learnt something: requests for a built-in score above the rest, on the whole.
    asks = np.asarray([r.expected in ids for r in item.rows])
    assert got[asks].mean() > 0.5 > got[~asks].mean()


def _lexical_routing_with(p_words: float) -> tuple[Candidates, BuiltinModel]:
    features = np.zeros((2, len(LEXICAL_RANK)))
    features[:, 0] = [0.9, 0.4]  # the greeting workflow ranks first...
    features[0, LEXICAL_RANK.index("char")] = 0.6  # ...and its character grams fit well
    message = np.ones(len(default_routing(False).gate.features) - 2)
    found = Candidates(
        ["greet_user", "order_laptop"], features, message, None, builtin_words=p_words
    )
    return found, BuiltinModel(frozenset({"greet_user"}), words=WordModel({}, 0.0))


@pytest.mark.parametrize(
    ("p_words", "first"),
    [(LEXICAL_BUILTIN_VETO / 2, "order_laptop"), (LEXICAL_BUILTIN_VETO * 2, "greet_user")],
)
def test_the_word_model_sends_a_first_built_in_away_when_all_but_sure(
    p_words: float, first: str
) -> None:
    found, builtin = _lexical_routing_with(p_words)
    routing = default_routing(False)
    ranker = replace(
        routing.ranker,
        weights=(1.0,) + (0.0,) * (len(LEXICAL_RANK) - 1),
        bias=0.0,
        mean=(0.0,) * len(LEXICAL_RANK),
        scale=(1.0,) * len(LEXICAL_RANK),
    )
    decision = decide(replace(routing, ranker=ranker, builtin=builtin), found)
    assert decision.ranked[0][0] == first


def test_the_shipped_lexical_routing_carries_the_word_model() -> None:
    builtin = default_routing(False).builtin
    assert builtin is not None
    assert builtin.words is not None
    assert builtin.model is None
    assert builtin.ids == {item.manifest.workflow_id for item in load_builtin()[0]}
    # The semantic configuration reads the same word model beside its embedding model.
    semantic = default_routing(True).builtin
    assert semantic is not None
    assert semantic.model is not None
    assert semantic.words == builtin.words


def test_with_the_built_ins_alone_requests_for_other_things_match_nothing() -> None:
    # Written for this test, after the fit: the character rule alone let each of these through
    # to a built-in (the publishing or the authoring workflow); the word model does not.
    registry = WorkflowRegistry(
        [item.manifest for item in load_builtin()[0]], matcher=WorkflowMatcher()
    )
    for message in (
        "please draft a letter to the council about the missed bin collection",
        "can you review the lease before I sign it tomorrow",
        "write up the minutes from this morning's board meeting",
        "publish the spring menu on the website",
    ):
        assert registry.match(message) == [], message
    for message, expected in (
        ("hello there", "greet_user"),
        ("split the bill between four of us", "guided_calculation"),
        ("switch to another mode", "choose_mode"),
        ("I want to create a new workflow for onboarding", "author_workflow"),
        ("review the draft workflow before publishing", "review_and_publish_workflow"),
    ):
        assert [m.workflow_id for m in registry.match(message)][:1] == [expected], message


def test_the_shipped_lexical_gate_reads_the_request_word_model() -> None:
    routing = default_routing(False)
    assert routing.words is not None
    assert routing.gate.features[-1] == "request_words"
    assert dict(zip(routing.gate.features, routing.gate.weights, strict=True))["request_words"] > 0
    assert default_routing(True).words is None
    assert "request_words" not in default_routing(True).gate.features


@pytest.mark.parametrize(
    ("message", "asks"),
    # Written for this test, after the fit.
    [
        ("please open a ticket for the broken printer", True),
        ("can you book the meeting room for Thursday", True),
        ("I need the quarterly numbers pulled together for the board", True),
        ("we had a lovely time at the seaside last weekend", False),
        ("my onboarding last year was a mess honestly", False),
        ("what does DDR stand for?", False),
        ("thanks, that's all for now", False),
    ],
)
def test_the_request_word_model_tells_requests_from_chat_and_stories(
    message: str, asks: bool
) -> None:
    words = default_routing(False).words
    assert words is not None
    assert (words.probability(message) >= 0.5) is asks


def test_the_matcher_feeds_the_request_word_model_to_the_gate() -> None:
    matcher = WorkflowMatcher()
    WorkflowRegistry([item.manifest for item in load_builtin()[0]], matcher=matcher).match("x")
    words = matcher.model.words
    assert words is not None
    for message in ("hello there", "we had a lovely time at the seaside last weekend"):
        found = matcher.candidates(message)
        assert found.message[-1] == pytest.approx(words.probability(message))
    # A routing fitted without the model: the gate's own mean, which adds nothing.
    bare = WorkflowMatcher(model=replace(matcher.model, words=None))
    WorkflowRegistry([item.manifest for item in load_builtin()[0]], matcher=bare).match("x")
    gate = bare.model.gate
    mean = gate.mean[gate.features.index("request_words")]
    assert bare.candidates("hello there").message[-1] == pytest.approx(mean)
