"""The one paired bootstrap (jouleroute/stats.py): the interval every win-or-tie call in jouleroute reads."""

from __future__ import annotations

import numpy as np
import pytest

from jouleroute.stats import paired_mean_ci


def test_the_interval_holds_the_mean_and_excludes_0_only_for_a_steady_edge():
    rng = np.random.default_rng(2)
    noisy = rng.normal(0.0, 0.3, 60)
    low, high = paired_mean_ci(noisy)
    assert low < noisy.mean() < high and low < 0 < high
    low, high = paired_mean_ci(np.full(60, 0.01) + rng.normal(0, 0.001, 60))
    assert 0 < low < 0.01 < high
    assert paired_mean_ci([]) is None


def test_it_is_seeded_and_narrows_with_more_queries():
    rng = np.random.default_rng(3)
    diff = rng.normal(0.02, 0.2, 400)
    assert paired_mean_ci(diff) == paired_mean_ci(diff)
    wide, narrow = paired_mean_ci(diff[:50]), paired_mean_ci(diff)
    assert narrow[1] - narrow[0] < wide[1] - wide[0]
    half, full = paired_mean_ci(diff, confidence=0.5), paired_mean_ci(diff)
    assert full[0] < half[0] < half[1] < full[1]  # a lower confidence, a narrower interval
