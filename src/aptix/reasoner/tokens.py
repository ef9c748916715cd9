"""Counting tokens: tiktoken's ``cl100k_base`` when its file is on disk, else an estimate.

Tokens are counted with ``tiktoken`` (the ``tokens`` extra) when its ``cl100k_base`` encoding
file is already on disk, and with :class:`EstimatedTokens` otherwise. tiktoken's wheel does
not ship its encodings and would download them on first use; Aptix never lets it: put the
file in ``TIKTOKEN_CACHE_DIR`` beforehand to count exactly.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
import tempfile
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["EstimatedTokens", "TiktokenTokens", "TokenCounter", "default_counter"]

_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
_CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


class TokenCounter(Protocol):
    """Counts the tokens of a text."""

    @property
    def name(self) -> str:
        """What counts: ``estimate`` or ``tiktoken:<encoding>``."""
        ...

    def count(self, text: str) -> int:
        """The number of tokens in ``text``."""
        ...


class EstimatedTokens:
    """A deliberately pessimistic estimate: one token per 3 bytes of UTF-8.

    BPE tokenizers such as cl100k_base average about 4 bytes per token on English prose and
    fewer on code, numbers, JSON and non-Latin scripts (a CJK character is 3 bytes and about
    one token), so dividing by 3 overestimates most text and keeps requests inside a real
    model's window at the price of some unused budget.
    """

    name = "estimate"

    def count(self, text: str) -> int:
        """The estimated number of tokens in ``text``."""
        return -(-len(text.encode("utf-8")) // 3)


class TiktokenTokens:
    """Exact counts with a tiktoken encoding."""

    def __init__(self, encoding: Any) -> None:
        self._encoding = encoding
        self.name = f"tiktoken:{encoding.name}"
        # Earlier turns are counted again on every request: remember recent texts.
        self._cached: Callable[[str], int] = functools.lru_cache(maxsize=4096)(self._count)

    def _count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))

    def count(self, text: str) -> int:
        """The number of tokens in ``text``."""
        return self._cached(text)


@functools.cache
def default_counter() -> TokenCounter:
    """The tiktoken cl100k_base counter when installed with its file, else the estimate."""
    try:
        tiktoken = importlib.import_module("tiktoken")  # the optional ``tokens`` extra
    except ImportError:
        return EstimatedTokens()
    cache_dir = (
        os.environ.get("TIKTOKEN_CACHE_DIR")
        or os.environ.get("DATA_GYM_CACHE_DIR")
        or os.path.join(tempfile.gettempdir(), "data-gym-cache")
    )
    # tiktoken's own cache layout: the file is named after the SHA-1 of its URL. Only a file
    # that is there and intact is used; anything else would make tiktoken download it.
    path = os.path.join(cache_dir, hashlib.sha1(_CL100K_URL.encode()).hexdigest())
    try:
        with open(path, "rb") as handle:
            intact = hashlib.sha256(handle.read()).hexdigest() == _CL100K_SHA256
    except OSError:
        return EstimatedTokens()
    if not intact:
        return EstimatedTokens()
    return TiktokenTokens(tiktoken.get_encoding("cl100k_base"))
