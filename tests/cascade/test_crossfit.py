"""Each target's rule scored out of fold on selection (policy/cascade_choice.py), and its config (policy/cascade_config.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from jouleroute.policy.cascade_choice import crossfit_targets
from jouleroute.policy.cascade_config import ROUTER_TARGET, CascadeConfig
from jouleroute.cascade.matrix import cascade_matrix
from jouleroute.policy.target import Target as CascadeTarget
from jouleroute.evaluation.config import EvaluateConfig
from jouleroute.evaluation.deployed import selection_matrix
from jouleroute.policy.singles import pick_singles
from tests.cascade.pool import synthetic_pool

ABOVE = {"above_best": CascadeTarget(above_best=0.0)}


def _selection(profile, queries):
    m = cascade_matrix(profile, selection_matrix(profile, queries, "energy_j"))
    return m, m.candidates[pick_singles(m.correct, m.energy_j, 0.0)[0]]


def test_a_pair_that_agrees_exactly_when_right_keeps_its_lead_out_of_fold():
    # cheap_a and cheap_b (0.6 each) agree only when both are right: asking `best` (0.9) on the rest reaches
    # 0.36 + 0.64 * 0.9 = 0.94 for far less energy, a real lead that survives choosing the chain
    m, _ = _selection(*synthetic_pool(n=800, seed=2))
    oof = crossfit_targets(m, ABOVE, folds=5, tolerance=0.01, samples=300, confidence=0.95, seed=0)["above_best"]
    assert oof["n_queries"] == len(m.query_ids) and sum(oof["chains"].values()) == 5
    assert oof["accuracy_diff_vs_best_ci"][0] > 0 and oof["energy_share_of_best_ci"][1] < 1


def test_too_few_queries_or_folds_skip_the_check():
    m, _ = _selection(*synthetic_pool(n=400, seed=1))
    assert crossfit_targets(m, ABOVE, 1, 0.01, 0, 0.95, 0) == {}
    assert crossfit_targets(m.take(range(6)), ABOVE, 5, 0.01, 0, 0.95, 0) == {}


def test_the_router_s_own_target_is_added_once():
    cfg = CascadeConfig()
    assert ROUTER_TARGET not in cfg.with_router_target("iso_accuracy", 0.77)  # already there by default
    added = cfg.with_router_target("energy_share", 0.5)
    assert added[ROUTER_TARGET] == CascadeTarget(energy_share=0.5) and set(cfg.targets) < set(added)
    assert cfg.with_router_target(None, None) == cfg.targets


def test_the_cascade_config_rejects_typos_and_names_that_are_no_file_names():
    cfg = EvaluateConfig(cascade={"targets": {"nine_tenths": {"energy_share": 0.9}}, "max_stage_size": 3})
    assert cfg.cascade.targets["nine_tenths"].describe() == "≤ 90% of the best single's energy"
    for bad in ({"enable": False}, {"targets": {"a/b": {"energy_share": 0.9}}},
                {"targets": {ROUTER_TARGET: {"energy_share": 0.9}}}, {"targets": {"x": {"energy_shar": 0.9}}},
                {"max_stage_size": 4}):
        with pytest.raises(ValidationError):
            EvaluateConfig(cascade=bad)
