"""The matcher's word caches keep short words only, so their memory has a small bound.

They hold 65,536 words each. Any word was kept, up to the 2,000 characters a matched message
keeps: 366 KB of n-grams for one such word, so a client's messages could fill the caches with
gigabytes. Long words (identifiers, encoded data) seldom repeat, so they are cut each time.
"""

from __future__ import annotations

from aptix.workflows.matching import evidence, text


def _sizes() -> tuple[int, int]:
    return (
        evidence._cached_ngrams.cache_info().currsize,
        text._cached_stem.cache_info().currsize,
    )


def test_long_words_are_not_remembered_by_the_word_caches() -> None:
    before = _sizes()
    for i in range(20):
        word = f"{'q' * 1_990}{i:04d}"  # one 1,994-character word per message, each new
        assert evidence.char_ngrams(word)[f" {word[:4]}"] == 1
        assert text.terms(word) == [word]
    assert _sizes() == before


def test_short_words_are_remembered_and_cut_alike() -> None:
    word = "zqxwvcachedword"  # 15 characters, as no catalog has it
    assert len(word) <= text.MAX_CACHED_WORD
    before = _sizes()
    grams = evidence.char_ngrams(f"{word} {word}")
    assert _sizes() == (before[0] + 1, before[1])
    assert grams == evidence.char_ngrams(word) + evidence.char_ngrams(word)
    assert text.stem(word) == text._stem(word)
    assert _sizes() == (before[0] + 1, before[1] + 1)
