"""Held-out scoring of a router against trivial policies: hand-computed values.

Toy pool: ``small`` costs 1 J, ``large`` 4 J, so with ``max`` normalization small = 0.25,
large = 1.0 and at λ=1 the utilities are correct − 0.25 and correct − 1.
"""

from __future__ import annotations

import pandas as pd
import pytest

from jouleroute.routing.base import Router, RoutingDecisions
from jouleroute.evaluation.label_eval import label_accuracy

ENERGY = {"small": 1.0, "large": 4.0}


class LookupRouter(Router):
    """A fixed policy: query_id -> candidate id (may name something outside the pool, to test scoring)."""

    def __init__(self, choices: dict[str, str]):
        super().__init__(["large", "small"])
        self.choices = choices

    def score(self, queries: pd.DataFrame):
        raise NotImplementedError("decides by lookup, possibly outside the pool: route() only")

    def route(self, queries: pd.DataFrame, lam: float = 0.0) -> RoutingDecisions:
        ids = [str(q) for q in queries["query_id"]]
        return RoutingDecisions(ids, [self.choices[q] for q in ids])


def _row(qid: str, small: int, large: int, label: str, lam: float = 1.0) -> dict:
    return {"query_id": qid, "question": f"question {qid}", "task": "toy", "lam": lam, "label": label,
            "correct_by_candidate": {"small": small, "large": large}, "energy_by_candidate": ENERGY}


VAL = [_row("q1", small=1, large=1, label="small"), _row("q2", small=0, large=1, label="large")]
TRAIN = [_row("t1", small=0, large=1, label="large")]


def test_router_that_follows_the_labels_beats_every_trivial_policy():
    result = label_accuracy(LookupRouter({"q1": "small", "q2": "large"}), VAL, train_rows=TRAIN)
    stats = result["by_lambda"]["1"]
    assert stats["label_accuracy"] == 1.0
    assert stats["router_utility"] == pytest.approx((0.75 + 0.0) / 2)
    assert stats["majority_label"] == "small"  # tie on val: the first label seen
    assert stats["majority_utility"] == pytest.approx((0.75 - 0.25) / 2)
    assert stats["best_constant"] == "large"  # picked on TRAIN: large is right there
    assert stats["best_constant_utility"] == pytest.approx(0.0)
    assert stats["random_utility"] == pytest.approx(((0.75 + 0.0) / 2 + (-0.25 + 0.0) / 2) / 2)
    assert stats["oracle_utility"] == pytest.approx(0.375)
    overall = result["overall"]
    assert overall["beats_trivial"] is True
    assert overall["utility_gap_closed"] == pytest.approx(1.0)
    assert result["best_constant_picked_on"] == "train"


def test_constant_router_does_not_beat_the_majority_policy():
    result = label_accuracy(LookupRouter({"q1": "small", "q2": "small"}), VAL, train_rows=TRAIN)
    assert result["overall"]["router_utility"] == pytest.approx(result["overall"]["majority_utility"])
    assert result["overall"]["beats_trivial"] is False


def test_a_choice_outside_the_pool_scores_below_every_candidate():
    result = label_accuracy(LookupRouter({"q1": "small", "q2": "bogus"}), VAL)
    stats = result["by_lambda"]["1"]
    assert stats["valid_share"] == 0.5
    assert stats["router_utility"] == pytest.approx((0.75 + (-1.0 - 1.0)) / 2)
    assert result["overall"]["beats_trivial"] is False
    assert result["best_constant_picked_on"] == "val"  # no train rows: the optimistic pick is stated
