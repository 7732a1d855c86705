"""Metric functions on a hand-computed table (numbers worked out in the comments)."""

from __future__ import annotations

import numpy as np
import pytest

from jouleroute.evaluation.frontier import (OracleSanityError, Point, aiq, check_oracle, cheapest_and_best,
                                            nondecreasing_hull, pareto_mask, pgr, savings_captured_pct)
from jouleroute.evaluation.metrics import j_per_correct, summarize
from jouleroute.evaluation.outcomes import build_matrix, oracle_choices, oracle_outcome, single_outcomes

from .conftest import profile_rows, queries_frame

# 4 queries x 3 candidates. Energies are constant per candidate except q4, where b is cheapest.
#        q1 q2 q3 q4
# a  ok: 1  0  0  0   J: 1 1 1 3
# b  ok: 1  1  0  0   J: 4 4 4 2
# c  ok: 1  1  1  0   J: 10 10 10 10
QIDS = ["t/1", "t/2", "t/3", "t/4"]
CORRECT = {"a": [1, 0, 0, 0], "b": [1, 1, 0, 0], "c": [1, 1, 1, 0]}
ENERGY = {"a": [1, 1, 1, 3], "b": [4, 4, 4, 2], "c": [10, 10, 10, 10]}


@pytest.fixture()
def matrix():
    tasks, splits = ["t"] * 4, ["test"] * 4
    return build_matrix(profile_rows(QIDS, tasks, splits, CORRECT, ENERGY), queries_frame(QIDS, tasks, splits),
                        "test", "energy_j")


def test_oracle_is_cheapest_correct_else_cheapest(matrix):
    oracle = oracle_outcome(matrix)
    # q1 a (1 J), q2 b (4 J), q3 c (10 J), q4 nobody right -> cheapest, b (2 J)
    assert [matrix.candidates[j] for j in oracle.choice] == ["a", "b", "c", "b"]
    assert oracle.energy_j.tolist() == [1, 4, 10, 2]
    assert oracle.correct.mean() == 0.75


def test_oracle_choices_series_matches():
    tasks, splits = ["t"] * 4, ["test", "test", "train", "train"]
    series = oracle_choices(profile_rows(QIDS, tasks, splits, CORRECT, ENERGY))
    assert series.to_dict() == {"t/1": "a", "t/2": "b", "t/3": "c", "t/4": "b"}


def test_summary_and_j_per_correct(matrix):
    b = single_outcomes(matrix)[1]
    s = summarize(b.correct, b.energy_j, b.latency_s, b.choice, matrix.candidates)
    assert s["accuracy"] == 0.5
    assert s["energy_total_j"] == 14 and s["j_per_query"] == 3.5
    assert s["j_per_correct"] == 7.0  # 14 J for 2 correct answers
    assert s["share"] == {"a": 0.0, "b": 1.0, "c": 0.0}
    assert j_per_correct(np.zeros(3), np.ones(3)) is None


SINGLES = [Point("a", 1.0, 0.25), Point("b", 4.0, 0.5), Point("c", 10.0, 0.75)]


def test_aiq_of_singles_and_of_a_router():
    e, q = np.array([1.0, 4.0, 10.0]), np.array([0.25, 0.5, 0.75])
    # Hull (1,.25)-(4,.5)-(10,.75): area 3*(.25+.5)/2 + 6*(.5+.75)/2 = 4.875 over a range of 9.
    assert aiq(e, q, (1, 10)) == pytest.approx(4.875 / 9)
    # A router at (4, .75) lifts the hull: 3*(.25+.75)/2 + 6*.75 = 6 over 9.
    assert aiq(np.append(e, 4.0), np.append(q, 0.75), (1, 10)) == pytest.approx(6 / 9)
    # A dominated point changes nothing.
    assert aiq(np.append(e, 8.0), np.append(q, 0.3), (1, 10)) == pytest.approx(4.875 / 9)


def test_hull_drops_points_under_the_chord_and_flattens():
    hull = nondecreasing_hull(np.array([1.0, 5.0, 9.0, 12.0]), np.array([0.2, 0.3, 0.8, 0.7]))
    # (5, .3) is below the chord (1,.2)-(9,.8) at x=5 (.5); (12,.7) is worse than (9,.8).
    assert hull.tolist() == [[1.0, 0.2], [9.0, 0.8]]
    with pytest.raises(ValueError, match="below the cheapest point"):
        aiq(np.array([2.0, 3.0]), np.array([0.1, 0.2]), (1.0, 3.0))


def test_pgr_and_savings_captured():
    cheapest, best = cheapest_and_best(SINGLES)
    assert (cheapest.name, best.name) == ("a", "c")
    assert pgr(0.5, cheapest, best) == pytest.approx(0.5)  # (.5-.25)/(.75-.25)
    assert pgr(0.5, SINGLES[0], SINGLES[0]) is None
    oracle = Point("oracle", 4.25, 0.75)
    # (10 - 6.25) / (10 - 4.25) = 65.2%
    assert savings_captured_pct(0.75, 6.25, best, oracle, 0.01) == pytest.approx(100 * 3.75 / 5.75)
    assert savings_captured_pct(0.745, 6.25, best, oracle, 0.01) == pytest.approx(100 * 3.75 / 5.75)
    assert savings_captured_pct(0.73, 6.25, best, oracle, 0.01) == 0.0  # lost more than 1 point
    assert savings_captured_pct(0.75, 4.25, best, oracle, 0.01) == pytest.approx(100.0)
    assert savings_captured_pct(0.75, 5.0, best, Point("o", 10.0, 0.75), 0.01) is None


def test_pareto_mask():
    points = SINGLES + [Point("r", 4.0, 0.75), Point("twin", 4.0, 0.75)]
    # b and c are dominated by r; r and its exact twin do not dominate each other.
    assert pareto_mask(points) == [True, False, False, True, True]


def test_oracle_sanity_check_triggers():
    oracle = Point("oracle", 4.25, 0.75)
    check_oracle(oracle, SINGLES + [Point("equal", 4.25 * (1 + 1e-12), 0.75), Point("cheap-wrong", 1.0, 0.5)])
    with pytest.raises(OracleSanityError, match="'bad'.*less than the oracle"):
        check_oracle(oracle, SINGLES + [Point("bad", 4.0, 0.75)])
