"""Batches of similar length: every index once, at most ``size`` per batch, padding bounded."""

from __future__ import annotations

import numpy as np

from jouleroute.routing.lm.scoring import length_batches


def padded_over_real(lengths, batches) -> float:
    return sum(len(b) * max(lengths[i] for i in b) for b in batches) / sum(lengths)


def test_every_prompt_once_within_the_size_and_shortest_first():
    lengths = [40, 12, 95, 41, 39, 100, 13, 60]
    batches = length_batches(lengths, size=3)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert all(1 <= len(b) <= 3 for b in batches)
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(flat)


def test_mixed_lengths_split_where_padding_would_grow():
    rng = np.random.default_rng(0)
    lengths = list(rng.integers(15, 104, size=16))  # the replay study's spread of query tokens
    one_pass = [sorted(range(16), key=lambda i: lengths[i])]
    batches = length_batches(lengths, size=16)
    assert len(batches) > 1
    assert padded_over_real(lengths, batches) < padded_over_real(lengths, one_pass)
    for b in batches:  # each batch within its bound: 25 % of its real tokens, or 64 tokens
        real = sum(lengths[i] for i in b)
        assert len(b) * max(lengths[i] for i in b) - real <= max(0.25 * real, 64)


def test_equal_lengths_fill_whole_batches():
    assert [len(b) for b in length_batches([30] * 10, size=4)] == [4, 4, 2]
