"""The promotion gate (loop/gate.py): a better candidate is promoted, a worse or dearer one refused, with its
figures; synthetic per-query outcomes whose differences are known by construction."""

from __future__ import annotations

import numpy as np
import pytest

from jouleroute.loop.gate import PROMOTE, REFUSE, promotion_decision


def _traffic(n: int = 800, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.random(n) < 0.7, np.full(n, 10.0)  # the serving policy: right on 70% at 10 J


def test_a_cheaper_candidate_as_accurate_as_the_serving_policy_is_promoted():
    right, joules = _traffic()
    out = promotion_decision(right, joules * 0.6, right, joules, margin=0.03)
    assert out["decision"] == PROMOTE and out["energy_verdict"] == "cheaper"
    assert out["accuracy_diff"] == 0 and out["energy_ratio"] == pytest.approx(0.6)


def test_a_candidate_that_routes_new_traffic_badly_is_refused_and_says_why():
    right, joules = _traffic()
    worse = right.copy()
    worse[: len(worse) // 5] = False  # a new task, the first fifth of the newest traffic, answered wrong
    out = promotion_decision(worse, joules * 0.5, right, joules, margin=0.03)
    assert out["decision"] == REFUSE and out["accuracy_verdict"] == "inferior"
    assert "accuracy inferior at margin 0.03" in out["reason"] and out["accuracy_diff_ci"][1] < -0.03


def test_a_dearer_candidate_is_refused_even_when_as_accurate():
    right, joules = _traffic()
    out = promotion_decision(right, joules * 1.2, right, joules, margin=0.03)
    assert out["decision"] == REFUSE and out["energy_verdict"] == "dearer" and "dearer in joules" in out["reason"]


def test_the_gate_needs_the_same_queries():
    with pytest.raises(ValueError, match="same, non-empty set of queries"):
        promotion_decision([1, 0], [1, 1], [1], [1], margin=0.03)


def test_a_tie_on_both_figures_is_promoted_and_says_it_is_a_tie():
    """The issue's rule (non-inferior, not dearer) promotes a candidate that gains nothing: the reason says so."""
    right, joules = _traffic()
    out = promotion_decision(right, joules, right, joules, margin=0.03)
    assert out["decision"] == PROMOTE and "a tie: neither interval shows a gain" in out["reason"]
    cheaper = promotion_decision(right, joules * 0.6, right, joules, margin=0.03)
    assert "a tie" not in cheaper["reason"]
