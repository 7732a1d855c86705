"""The saving in a user's terms: iso-accuracy energy share, oracle savings captured, and the task_best rule."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from jouleroute.evaluation import EvaluateConfig, RouterRun, run_evaluate
from jouleroute.evaluation.iso_accuracy import iso_accuracy
from jouleroute.routing.baselines.task_best import TaskBestRouter

from .conftest import utility_router


def test_cheapest_point_within_tolerance_by_hand():
    # 10 queries; best single: 8 right at 10 J each. Oracle: 2 J/query.
    best_c, best_e = np.array([1.0] * 8 + [0.0] * 2), np.full(10, 10.0)
    oracle_e = np.full(10, 2.0)
    # point a: 8 right at 4 J (qualifies); point b: 7 right at 3 J (0.70 < 0.80 - 0.05); point c: 9 right at 12 J
    a = (np.array([1.0] * 8 + [0.0] * 2), np.full(10, 4.0))
    b = (np.array([1.0] * 7 + [0.0] * 3), np.full(10, 3.0))
    c = (np.array([1.0] * 9 + [0.0]), np.full(10, 12.0))
    fam = (np.stack([a[0], b[0], c[0]], 1), np.stack([a[1], b[1], c[1]], 1), ["f:1", "f:2", "f:3"])
    never = (b[0][:, None], b[1][:, None], ["weak"])
    out = iso_accuracy(best_c, best_e, oracle_e, {"f": fam, "weak": never}, tolerance=0.05, samples=200, seed=1)
    f = out["policies"]["f"]
    assert f["reached"] and f["point"] == "f:1" and f["energy_share"] == pytest.approx(0.4)
    assert f["oracle_savings_captured_pct"] == pytest.approx(100 * (10 - 4) / (10 - 2))
    low, high = f["energy_share_ci"]
    assert low <= 0.4 <= high <= 1.0
    w = out["policies"]["weak"]  # never within tolerance: the best single itself, no saving
    assert not w["reached"] and w["point"] is None and w["energy_share"] == 1.0
    assert w["oracle_savings_captured_pct"] == 0.0
    assert out["oracle_energy_share"] == pytest.approx(0.2)


def test_a_fractional_expectation_counts_as_its_value():
    best_c, best_e = np.full(4, 0.5), np.full(4, 8.0)
    point = (np.full((4, 1), 0.45), np.full((4, 1), 2.0), ["p"])
    out = iso_accuracy(best_c, best_e, np.full(4, 1.0), {"p": point}, tolerance=0.01, samples=0)
    assert not out["policies"]["p"]["reached"]  # 0.45 < 0.5 - 0.01
    out = iso_accuracy(best_c, best_e, np.full(4, 1.0), {"p": point}, tolerance=0.05, samples=0)
    assert out["policies"]["p"]["energy_share"] == pytest.approx(0.25)
    assert out["policies"]["p"]["energy_share_ci"] is None


def test_task_best_routes_each_task_to_its_most_accurate_train_candidate():
    rows = []
    for i in range(8):
        task = "alpha" if i % 2 else "beta"
        for cand, right, joules in (("c1", task == "alpha", 1.0), ("c2", True, 5.0), ("c3", task == "beta", 2.0)):
            rows.append({"query_id": f"q{i}", "candidate_id": cand, "task": task, "split": "train",
                         "correct": int(right), "energy_j": joules})
    rule = TaskBestRouter(["c1", "c2", "c3"]).fit(pd.DataFrame(rows))
    asked = pd.DataFrame({"query_id": ["x", "y", "z"], "task": ["alpha", "beta", "unseen"]})
    # alpha: c1 and c2 both right, c1 cheaper; beta: c2 and c3, c3 cheaper; unseen: c2 (right everywhere)
    assert rule.route(asked).candidate_ids == ["c1", "c3", "c2"]
    assert rule.route(asked, lam=10.0).candidate_ids == ["c1", "c3", "c2"]  # no λ in a fixed rule


def test_evaluate_reports_the_saving_in_metrics_and_markdown(synthetic, tmp_path):
    runs = [RouterRun(f"util:{lam:g}", "util", lam, utility_router(synthetic, lam, noise=0.02))
            for lam in (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)]
    cfg = EvaluateConfig(lambdas=(0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0), plots=False, bootstrap_samples=100,
                         accuracy_tolerance=0.05)
    result = run_evaluate(synthetic["profile"], synthetic["queries"], runs, cfg, tmp_path,
                          val_contest={"winner": {"family": "util", "name": "util", "val_utility": 0.5},
                                     "contenders": [], "lambdas": [], "energy_norm": "max", "n_val_queries": 0})
    block = json.loads((tmp_path / "metrics.json").read_text())["iso_accuracy"]
    util = block["policies"]["util"]
    best = block["best_single"]
    single = result.metrics["singles"][best]
    assert single["accuracy"] == pytest.approx(block["best_accuracy"])
    # the cheapest swept point within 0.05 of the best single, as a share of its energy
    members = {n: r for n, r in result.metrics["routers"].items() if n.startswith("util:")}
    ok = [r["j_per_query"] for r in members.values() if r["accuracy"] >= single["accuracy"] - 0.05 - 1e-12]
    assert util["reached"] and util["energy_share"] < 1.0
    assert util["energy_share"] == pytest.approx(min(ok) / single["j_per_query"])
    assert [util["energy_share_ci_low"], util["energy_share_ci_high"]] == util["energy_share_ci"]  # MLflow: scalars
    assert block["champion"]["family"] == "util" and block["champion"]["energy_share"] == util["energy_share"]
    assert "## Hindsight bound: the saving at the best single model's test accuracy" in (tmp_path / "report.md").read_text()
