"""The LM router's kNN evidence is chosen on val (evaluation/knn_evidence.py), with a cross-fitted figure.

Real router_data val rows from a small synthetic profile; the two routers' scores are made by hand so
that one of them knows each query's outcome and the other does not, which fixes the right answer.
"""

from __future__ import annotations

import numpy as np
import pytest

from jouleroute.evaluation.knn_evidence import choose_knn_evidence, fold_of
from jouleroute.evaluation.label_eval import load_rows
from jouleroute.evaluation.val_contest import val_queries
from jouleroute.routing.scores import Scores
from tests.evaluation.test_val_contest import ENERGY, SKILL, _data

POOL = sorted(SKILL)


def _rows(tmp_path):
    from jouleroute.training.config import RouterDataConfig
    from jouleroute.training.router_data import run_router_data

    profile, queries = _data()
    run_router_data(profile, queries, RouterDataConfig(), tmp_path)
    return load_rows(tmp_path / "val.jsonl")


def _scores(rows, knows: bool) -> Scores:
    """Merit = each candidate's real val correctness (``knows``) or a constant (blind)."""
    ids = list(val_queries(rows)["query_id"])
    first = {r["query_id"]: r for r in rows}
    merit = np.array([[float(first[q]["correct_by_candidate"][c]) if knows else 0.5 for c in POOL] for q in ids])
    energy = np.tile([ENERGY[c] for c in POOL], (len(ids), 1))
    return Scores.from_energy(ids, POOL, merit, energy, "max")


def test_evidence_from_the_router_that_knows_is_chosen_and_scored_cross_fitted(tmp_path):
    rows = _rows(tmp_path)
    blind, knows = _scores(rows, False), _scores(rows, True)
    chosen = choose_knn_evidence(blind, knows, rows, "max", [0.25, 0.75])
    assert not chosen["plain"] and chosen["weight"] > 0
    assert chosen["val_utility"][f"{chosen['weight']:g}/{chosen['energy']}"] > chosen["val_utility_alone"]
    cross = chosen["cross_fitted"]
    assert len(cross["fold_choices"]) == 2 and set(cross["by_lambda"]) == {r_lam for r_lam in chosen_lams(rows)}
    # scored on rows it was not chosen on: never above the in-sample best, and still above the blind LM
    assert cross["val_utility"] <= max(chosen["val_utility"].values()) + 1e-12
    assert cross["val_utility"] > chosen["val_utility_alone"]


def test_the_lm_alone_is_kept_when_the_neighbours_add_nothing(tmp_path):
    rows = _rows(tmp_path)
    blind, knows = _scores(rows, False), _scores(rows, True)
    chosen = choose_knn_evidence(knows, blind, rows, "max", [0.25, 0.75])
    assert chosen["plain"] and chosen["weight"] == 0.0 and chosen["energy"] == "first"


def chosen_lams(rows):
    from jouleroute.routing.lm.spec import format_lambda

    return {format_lambda(r["lam"]) for r in rows}


def test_folds_are_stable_and_split_the_queries():
    ids = [f"q{i}" for i in range(200)]
    folds = [fold_of(q) for q in ids]
    assert folds == [fold_of(q) for q in ids] and 60 < sum(folds) < 140
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        from jouleroute.evaluation.config import EvaluateConfig

        EvaluateConfig(knn_evidence_weights=(0.5, 1.5))


def test_a_choice_that_does_not_pay_on_the_other_half_of_val_is_not_adopted(tmp_path):
    """kNN is right on one fold of val and wrong on the other: whatever the in-sample best, the choice made
    on one half does not pay on the other, so the LM router is used alone."""
    rows = _rows(tmp_path)
    blind, knows = _scores(rows, False), _scores(rows, True)
    flipped = knows.merit.copy()
    for i, q in enumerate(knows.query_ids):
        if fold_of(q) == 1:
            flipped[i] = 1.0 - flipped[i]
    half_right = Scores.from_energy(knows.query_ids, POOL, flipped, knows.energy_j, "max")
    chosen = choose_knn_evidence(blind, half_right, rows, "max", [0.25, 0.75])
    assert chosen["cross_fitted"]["val_utility"] <= chosen["val_utility_alone"] + 1e-12
    assert chosen["plain"] and (chosen["weight"], chosen["energy"]) == (0.0, "first")
