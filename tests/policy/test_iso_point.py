"""The iso-accuracy point and the floor test (policy/meet.py) that the val contest, the test split's iso-accuracy
figures, savings captured and the study page's targets all call."""

from __future__ import annotations

import numpy as np

from jouleroute.policy.meet import iso_accuracy_point, reaches_floor


def test_the_cheapest_point_within_tolerance_or_the_best_single_itself():
    acc = [[0.80, 0.79, 0.70], [0.70, 0.60, 0.50], [0.80, 0.80, 0.80]]
    joules = [[9.0, 4.0, 1.0], [1.0, 1.0, 1.0], [12.0, 11.0, 15.0]]
    column, iso_j, share = iso_accuracy_point(acc, joules, [0.80, 0.80, 0.80], [10.0, 10.0, 10.0], 0.01)
    assert column.tolist() == [1, -1, 1]  # none qualifies in row 1; row 2's cheapest qualifier costs more than the best
    assert iso_j.tolist() == [4.0, 10.0, 10.0] and share.tolist() == [0.4, 1.0, 1.0]
    assert np.isnan(iso_accuracy_point([[0.9]], [[1.0]], 0.8, 0.0, 0.0)[2][0])  # a best single that costs nothing


def test_the_floor_allows_float_noise_and_nothing_more():
    assert reaches_floor(0.1 + 0.2 - 0.01, 0.3, 0.01) and reaches_floor(0.29, 0.3, 0.01)
    assert not reaches_floor(0.29 - 1e-9, 0.3, 0.01)
    assert reaches_floor([0.5, 0.7], [0.8, 0.8], 0.1).tolist() == [False, True]
