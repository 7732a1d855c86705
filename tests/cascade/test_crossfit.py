"""Each target's rule scored out of fold on selection (policy/cascade_choice.py), and its config (policy/cascade_config.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from jouleroute.cascade.matrix import CascadeMatrix
from jouleroute.cascade.search import search
from jouleroute.policy.cascade_choice import (Calibration, calibrate_slack, choose_calibrated, choose_chain,
                                              crossfit_outcomes, crossfit_targets)
from jouleroute.policy.singles import best_column
from jouleroute.stats import paired_mean_ci
from jouleroute.policy.cascade_config import ROUTER_TARGET, CascadeConfig
from jouleroute.cascade.matrix import cascade_matrix
from jouleroute.policy.target import Target as CascadeTarget
from jouleroute.evaluation.config import EvaluateConfig
from jouleroute.evaluation.deployed import selection_matrix
from jouleroute.policy.singles import pick_singles
from jouleroute.evaluation.cascade_section import _describe
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


# --- a floor target's slack, calibrated out of fold (policy/cascade_choice.py, calibrate_slack) ---------------------

SLACKS = (0.0, 0.005, 0.01, 0.015, 0.02)
ISO = {"iso": CascadeTarget(iso_accuracy=True)}


def _lookalikes(n: int, seed: int, looks: int = 5) -> CascadeMatrix:
    """A best single (0.85, 20 J) and ``looks`` cheap models that are one model with a few flipped answers (0.83,
    wrong answers all alike): they agree on their mistakes, so no chain of them beats the best single, and the
    cheapest chain clearing best − 0.01 on selection clears it by luck."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    ids, gold, base = [f"gsm8k/{i:04d}" for i in range(n)], rng.integers(10, 1000, n), rng.random(n) < 0.83
    models = {"best": (rng.random(n) < 0.85, 20.0)} | {f"look{j}": (base ^ (rng.random(n) < 0.04), 3.0 + j)
                                                        for j in range(looks)}
    rows = [{"query_id": q, "candidate_id": name, "task": "gsm8k", "split": "train", "correct": int(right[i]),
             "invalid": 0, "extracted_answer": str(gold[i] + (0 if right[i] else 1)), "output_tokens": 100,
             "output_text": f"the answer is {gold[i] + (0 if right[i] else 1)}", "latency_s": 0.01,
             "energy_j": joules * (0.5 + rng.random()), "energy_source": "modelled"}
            for name, (right, joules) in models.items() for i, q in enumerate(ids)]
    queries = pd.DataFrame({"query_id": ids, "task": "gsm8k", "split": "train", "gold": gold.astype(str)})
    profile = pd.DataFrame(rows)
    return cascade_matrix(profile, selection_matrix(profile, queries, "energy_j"))


def _meets_at(m, slack: float) -> bool:
    """The deployment's test of a rule out of fold (deployment.cascade_contenders, choose.choose_across_kinds): the
    pooled accuracy within the tolerance of the best single on all of ``m``, and the interval's lower end above
    −margin."""
    o = crossfit_outcomes(m, ISO, 5, 0.01, 200, 0.95, 0, 2, Calibration((slack,), 0.03))["iso"]
    assert o.slacks == [slack] * 5  # one slack offered: used as given in every fold
    diff = o.correct - m.correct[:, best_column(m.correct, m.energy_j)]
    return diff.mean() >= -0.01 - 1e-12 and paired_mean_ci(diff, 200, 0, 0.95)[0] > -0.03


def _calibrated(m, targets=ISO, slacks=SLACKS) -> dict:
    return calibrate_slack(m, targets, 0.01, 200, 0.95, 0, 2, Calibration(slacks, 0.03, 5))


def test_the_slack_is_the_smallest_whose_rule_meets_the_target_out_of_fold_and_the_largest_when_none_does():
    lucky = _lookalikes(600, seed=0)
    meets = [s for s in SLACKS if _meets_at(lucky, s)]
    assert meets and meets[0] > 0 and not _meets_at(lucky, 0.0)  # at the floor itself the rule falls short
    assert _calibrated(lucky) == {"iso": meets[0]}
    hopeless = _lookalikes(600, seed=1)
    assert not any(_meets_at(hopeless, s) for s in SLACKS)
    assert _calibrated(hopeless) == {"iso": 0.02}
    # a target that is no floor, one slack offered, or fewer queries than two per fold: no calibration
    assert _calibrated(lucky, ABOVE | ISO, (0.0,)) == {"above_best": 0.0, "iso": 0.0}
    assert _calibrated(lucky.take(range(9))) == {"iso": 0.0}


def test_the_calibration_judges_a_rule_as_the_deployment_does_against_the_best_single_on_all_its_data():
    # each fold's own best single can be a weaker one: judged against it, slack 0 passed here where the deployment,
    # judging against the best single on all selection data, refuses it
    pool = _lookalikes(600, seed=2)
    meets = [s for s in SLACKS if _meets_at(pool, s)]
    assert not _meets_at(pool, 0.0)
    assert _calibrated(pool) == {"iso": meets[0] if meets else SLACKS[-1]}


def test_a_chain_chosen_with_a_slack_clears_the_raised_floor_and_is_judged_at_the_floor():
    m = _lookalikes(600, seed=0)
    space = search(m, "best")
    plain = choose_chain(space, m, ISO["iso"], 0.01)
    raised = choose_chain(space, m, ISO["iso"], 0.01, slack=0.01)
    assert raised.selection["slack"] == 0.01 and raised.met_on_selection
    assert raised.selection["accuracy_diff_vs_best"] >= 0.0 - 1e-12  # best − 0.01 + 0.01
    assert plain.selection["energy_share_of_best"] < raised.selection["energy_share_of_best"]
    # an unreachable raised floor: the most accurate chain, and whether it meets the target is read at the floor
    top = choose_chain(space, m, ISO["iso"], 0.01, slack=1.0)
    assert top.selection["accuracy"] == space.accuracy.max() and top.met_on_selection
    assert raised.selection["slack_met"] and not top.selection["slack_met"]  # the page says which
    assert _describe(raised.selection).endswith("chosen 0.01 above it")
    assert _describe(top.selection).endswith("no chain 1 above it: the most accurate")
    assert "above it" not in _describe(plain.selection) + _describe({"target": {"kind": "above_best", "value": 0}})
    picked = choose_calibrated(space, m, ISO | ABOVE, 0.01, 200, 0.95, 0, 2, Calibration(SLACKS, 0.03, 5))
    assert picked["iso"].selection["slack"] == _calibrated(m)["iso"]
    assert "slack" not in picked["above_best"].selection


def test_nested_cross_fitting_calibrates_each_fold_on_its_other_folds_only():
    import numpy as np

    m = _lookalikes(600, seed=0)
    o = crossfit_outcomes(m, ISO, 5, 0.01, 200, 0.95, 0, 2, Calibration(SLACKS, 0.03, 5))["iso"]
    fold = np.random.default_rng(0).permutation(len(m.query_ids)) % 5
    assert o.slacks == [_calibrated(m.take(np.flatnonzero(fold != f)))["iso"] for f in range(5)]
    assert any(s > 0 for s in o.slacks)
    figures = crossfit_targets(m, ISO, 5, 0.01, 200, 0.95, 0, 2, Calibration(SLACKS, 0.03, 5))["iso"]
    assert figures["slacks"] == o.slacks


def test_calibration_slacks_are_accuracy_points_in_0_1():
    assert EvaluateConfig().cascade.calibration_slacks == list(SLACKS)
    for bad in ([], [-0.01], [1.5]):
        with pytest.raises(ValidationError):
            EvaluateConfig(cascade={"calibration_slacks": bad})
