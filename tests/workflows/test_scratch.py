"""Scratch arrays: lent zeroed, never shared between borrowers, left clean by matching."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from aptix.workflows.matching.combined import WorkflowMatcher
from aptix.workflows.matching.scratch import ScratchPool
from tests.workflows.evalset import synthetic_catalog, synthetic_messages


def test_an_array_is_reused_only_after_it_is_handed_back() -> None:
    pool = ScratchPool(4, np.float64)
    with pool.borrow() as first, pool.borrow() as second:
        assert first is not second
        assert first.tolist() == second.tolist() == [0.0] * 4
        first[1] = 2.5
        first[1] = 0.0
    with pool.borrow() as again:
        assert again is first or again is second
        assert again.tolist() == [0.0] * 4


def test_an_array_whose_block_raised_is_dropped() -> None:
    pool = ScratchPool(3, np.int32)
    spoiled: list[object] = []

    def fail() -> None:
        with pool.borrow() as array:
            spoiled.append(array)
            array[0] = 7
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        fail()
    with pool.borrow() as fresh:
        assert fresh is not spoiled[0]
        assert fresh.tolist() == [0, 0, 0]


def test_matching_leaves_its_scratch_clean() -> None:
    # Residue in a pooled array would leak one message's hits into the next one's scores.
    catalog = synthetic_catalog(300)
    messages = synthetic_messages(catalog, 40)
    reused = WorkflowMatcher()
    reused.rebuild(catalog)
    for message in messages:
        fresh = WorkflowMatcher()
        fresh.rebuild(catalog)
        assert reused.decide(message) == fresh.decide(message)
        assert reused.candidates(message).features.tolist() == (
            fresh.candidates(message).features.tolist()
        )


def test_matching_from_several_threads_at_once_decides_as_one_thread() -> None:
    # Each match borrows its own arrays: two matches sharing one would mix their hits.
    catalog = synthetic_catalog(2_000)
    messages = synthetic_messages(catalog, 60)
    matcher = WorkflowMatcher()
    matcher.rebuild(catalog)
    expected = [matcher.decide(message) for message in messages]
    with ThreadPoolExecutor(4) as pool:
        for _ in range(3):
            assert list(pool.map(matcher.decide, messages)) == expected
