"""blend_scores: the utility-scale mix of two routers' merits, aligned by candidate, weight in [0, 1]."""

from __future__ import annotations

import numpy as np
import pytest

from jouleroute.routing.blend import blend_scores
from jouleroute.routing.scores import Scores

IDS = ["q0", "q1"]


def _scores(candidates, merit, energy, scale=1.0):
    return Scores.from_energy(IDS, candidates, np.array(merit, float), np.array(energy, float), "max", scale=scale)


def test_weight_zero_is_the_first_router_and_one_is_the_second_on_the_utility_scale():
    lm = _scores(["a", "b"], [[4.0, 2.0], [0.0, 6.0]], [[1, 5], [1, 5]], scale=2.0)  # utility scale: /2
    knn = _scores(["a", "b"], [[0.1, 0.9], [0.8, 0.2]], [[2, 3], [2, 3]])
    assert np.allclose(blend_scores(lm, knn, 0.0).merit, lm.merit / 2)
    assert np.allclose(blend_scores(lm, knn, 1.0).merit, knn.merit)
    half = blend_scores(lm, knn, 0.5, energy="second")
    assert np.allclose(half.merit, 0.5 * lm.merit / 2 + 0.5 * knn.merit)
    assert np.allclose(half.energy_j, knn.energy_j) and np.allclose(blend_scores(lm, knn, 0.5).cost, lm.cost)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        blend_scores(lm, knn, 1.5)


def test_the_second_router_s_columns_are_aligned_to_the_first_s_candidates():
    lm = _scores(["a", "b"], [[4.0, 2.0], [0.0, 6.0]], [[1, 5], [1, 5]])
    knn = _scores(["a", "b"], [[0.1, 0.9], [0.8, 0.2]], [[2, 3], [2, 3]])
    swapped = _scores(["b", "a"], [[0.9, 0.1], [0.2, 0.8]], [[3, 2], [3, 2]])
    for energy in ("first", "second"):
        same, other = blend_scores(lm, knn, 0.25, energy), blend_scores(lm, swapped, 0.25, energy)
        assert other.candidates == ["a", "b"]
        assert np.allclose(same.merit, other.merit) and np.allclose(same.energy_j, other.energy_j)
    with pytest.raises(ValueError, match="same candidates"):
        blend_scores(lm, _scores(["a", "c"], [[0, 0], [0, 0]], [[1, 1], [1, 1]]), 0.5)
