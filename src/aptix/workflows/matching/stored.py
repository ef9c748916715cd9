"""A semantic index's encodings kept on disk, so that a restart reads them instead of the model.

Encoding is what building an index costs: 10,000 workflows take MiniLM some 85 s and the
cascade's larger encoder some 15 minutes of a core. The file holds each text's vector and
each workflow's distinct word pieces (:func:`.semantic._distinct_pieces`). It is named after
the model's hash, so another model never reads it, and it is only a cache: a file that is
missing, cut short or of another shape (rows of another width than the model's among them:
another model's file under this one's name) is ignored (with one warning) and written anew.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

__all__ = ["StoredEncodings", "group_key"]

_log = logging.getLogger("aptix.workflows")

#: Part of the file name: a change to what is stored, or how, starts a new file.
FORMAT = 1
#: A temporary file older than this was left by a writer that died (a write takes seconds).
STALE_SECONDS = 3600.0

Vectors = NDArray[np.float32]
Pieces = NDArray[np.float16]


def group_key(texts: Sequence[str]) -> str:
    """A stable key for one workflow's texts (their pieces are stored under it)."""
    return hashlib.sha256(json.dumps(list(texts)).encode("utf-8", "surrogatepass")).hexdigest()


class StoredEncodings:
    """The encodings of one model's index, in ``folder``; read once, written after builds."""

    def __init__(self, folder: Path, model: str, sha256: str) -> None:
        self.path = folder / f"{model}-{sha256[:16]}-v{FORMAT}.npz"
        self._lock = threading.Lock()

    def load(self, width: Callable[[], int]) -> tuple[dict[str, Vectors], dict[str, Pieces]]:
        """The stored vectors by text and pieces by :func:`group_key`; empty when unusable.

        ``width`` gives the length of the model's vectors; it is asked only of a file there is.
        """
        if not self.path.is_file():
            return {}, {}
        try:
            with self.path.open("rb") as handle, np.load(handle, allow_pickle=False) as data:
                texts = data["texts"].tolist()
                vectors = data["vectors"].astype(np.float32)
                keys = data["keys"].tolist()
                offsets = data["offsets"].tolist()
                pieces = data["pieces"].astype(np.float16)
            if (
                vectors.ndim != 2
                or pieces.ndim != 2
                or len(texts) != len(vectors)
                or len(offsets) != len(keys) + 1
                or (len(pieces) and pieces.shape[1] != vectors.shape[1])
                or offsets[-1] != len(pieces)
            ):
                raise ValueError("the arrays do not fit together")
        except (ValueError, KeyError, OSError, EOFError, zipfile.BadZipFile) as exc:
            return self._ignored(type(exc).__name__)
        # Rows of another width would meet the model's queries in the first match and fail
        # it (another model's file copied under this one's name).
        stored = vectors.shape[1] if len(vectors) else pieces.shape[1] if len(pieces) else 0
        if stored and stored != (expected := width()):
            return self._ignored(f"its rows hold {stored} numbers, the model's {expected}")
        by_text = {text: vectors[i] for i, text in enumerate(texts)}
        empty = np.zeros((0, 0), dtype=np.float16)  # as a workflow without pieces has
        by_group = {
            key: pieces[a:b] if b > a else empty
            for key, a, b in zip(keys, offsets[:-1], offsets[1:], strict=True)
        }
        return by_text, by_group

    def _ignored(self, reason: str) -> tuple[dict[str, Vectors], dict[str, Pieces]]:
        """Nothing, with one warning saying why the file is not used."""
        # Only a cache: the index is encoded anew and the file rewritten after the build.
        _log.warning(
            "Ignoring the stored encodings %s (%s); encoding anew.", self.path.name, reason
        )
        return {}, {}

    def save(self, vectors: Mapping[str, Vectors], pieces: Mapping[str, Pieces]) -> None:
        """Replace the file with these encodings (atomically: readers never see half a file)."""
        width = next(iter(vectors.values())).shape[0] if vectors else 0
        rows = [p for p in pieces.values() if p.size]
        sizes = [len(p) if p.size else 0 for p in pieces.values()]
        texts = np.asarray(list(vectors), dtype=str)
        matrix = (
            np.vstack(list(vectors.values())).astype(np.float32)
            if vectors
            else np.zeros((0, width), dtype=np.float32)
        )
        keys = np.asarray(list(pieces), dtype=str)
        offsets = np.cumsum([0, *sizes]).astype(np.int64)
        flat = np.vstack(rows).astype(np.float16) if rows else np.zeros((0, 0), np.float16)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Per process and thread: two writers never share a temporary file.
            tmp = self.path.with_name(f".{self.path.stem}.{os.getpid()}.{threading.get_ident()}")
            try:
                with tmp.open("wb") as handle:
                    np.savez(
                        handle, texts=texts, vectors=matrix, keys=keys, offsets=offsets, pieces=flat
                    )
                tmp.replace(self.path)
                self._sweep()
            except OSError as exc:
                tmp.unlink(missing_ok=True)
                _log.warning(
                    "The index's encodings were not stored (%s): the next start encodes them.",
                    type(exc).__name__,
                )

    def _sweep(self) -> None:
        """Remove temporary files a killed writer left; a live one's is seconds old."""
        cutoff = time.time() - STALE_SECONDS
        for left in self.path.parent.glob(f".{self.path.stem}.*"):
            with contextlib.suppress(OSError):  # another process swept it first
                if left.stat().st_mtime < cutoff:
                    left.unlink()
