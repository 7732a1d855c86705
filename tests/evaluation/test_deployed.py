"""The deployed point (evaluation/deployed.py, deployment.py): every choice on selection data, scored once on test.

The stage tests run the real evaluate stage on small synthetic profiles (real router_data val rows, real kNN and
MF fitted on hashing embeddings, nothing downloaded; tracking off, as in test_selection.py).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from jouleroute.evaluation.config import EvaluateConfig
from jouleroute.evaluation.deployed import choose_deployed, pick_singles, score_deployed
from jouleroute.routing.target import RouterTarget
from tests.evaluation.conftest import profile_rows
from tests.evaluation.test_selection import _data, _stage_repo

CHOICES = ("champion", "family", "chosen_by", "lam", "met_on_selection", "singles", "selection_sweep", "stability")


def _evaluate(ctx):
    from jouleroute.stages.evaluate import evaluate_stage

    return evaluate_stage(ctx).report


def test_shuffling_the_test_outcomes_changes_no_choice_only_the_scored_figures(tmp_path):
    """Mandatory target: the best single, the reference single, the champion and its λ do not depend on test."""
    profile, queries = _data()
    ctx = _stage_repo(tmp_path, profile, queries)
    before = _evaluate(ctx)
    shuffled = profile.copy()
    rng = np.random.default_rng(0)
    for candidate in shuffled["candidate_id"].unique():  # each model's test outcomes, shuffled across queries
        rows = shuffled.index[(shuffled["split"] == "test") & (shuffled["candidate_id"] == candidate)]
        for column in ("correct", "energy_j"):
            shuffled.loc[rows, column] = rng.permutation(shuffled.loc[rows, column].to_numpy())
    shuffled.to_parquet(ctx.path("profile"))
    after = _evaluate(ctx)
    assert {k: before["deployed"][k] for k in CHOICES} == {k: after["deployed"][k] for k in CHOICES}
    assert before["selection"]["winner"] == after["selection"]["winner"]
    scored = ("accuracy", "j_per_query", "routing_gain")
    assert [before["deployed"]["test"][k] for k in scored] != [after["deployed"]["test"][k] for k in scored]


def _pool(twin_correct_like_big: bool, n: int = 180, seed: int = 3) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Queries whose first word says which of two cheap specialists answers them; ``big`` answers all. With
    ``twin_correct_like_big`` a cheap ``twin`` answers exactly what ``big`` answers and the specialists nothing."""
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, 2, n)
    qids = [f"q{i:03d}" for i in range(n)]
    tasks = ["mmlu"] * n
    splits = ["train" if i < n // 2 else "val" if i < 3 * n // 4 else "test" for i in range(n)]
    questions = [f"{'alpha' if k else 'beta'} {'alpha' if k else 'beta'} question {i}" for i, k in enumerate(kind)]
    if twin_correct_like_big:
        correct = {"big": np.ones(n), "twin": np.ones(n), "small": np.zeros(n)}
        energy = {"big": np.full(n, 10.0), "twin": np.full(n, 3.0), "small": np.full(n, 1.0)}
    else:
        correct = {"big": np.ones(n), "alpha": kind == 1, "beta": kind == 0}
        energy = {"big": np.full(n, 10.0), "alpha": np.full(n, 1.0), "beta": np.full(n, 1.2)}
    energy = {c: e * (1 + 0.05 * rng.uniform(-1, 1, n)) for c, e in energy.items()}
    profile = profile_rows(qids, tasks, splits, correct, energy)
    return profile, pd.DataFrame({"query_id": qids, "task": tasks, "split": splits, "question": questions})


SECTIONS = {"baselines": {"families": ["knn", "mf"], "embedding": {"model": "hashing"}},
            "evaluate": {"plots": False, "bootstrap_samples": 300, "stability_samples": 50}}


def test_a_cheap_model_as_good_as_the_best_is_the_reference_and_routing_gains_nothing_over_it(tmp_path):
    profile, queries = _pool(twin_correct_like_big=True)
    report = _evaluate(_stage_repo(tmp_path, profile, queries, **SECTIONS))
    deployed = report["deployed"]
    assert deployed["singles"]["reference_single"]["candidate"] == "twin"
    test = deployed["test"]
    assert test["accuracy_diff_vs_best"] == pytest.approx(0.0) and test["view"] == "with_overhead"
    models = test["models_only"]  # the router's choices: the twin's energy, so no gain
    low, high = models["routing_gain_ci"]
    assert low <= 1.0 <= high and models["routing"] == "tie with the reference single"
    # counting the router's own metered cost, routing can only cost more than asking the twin directly
    assert test["routing_gain"] >= models["routing_gain"]


def test_complementary_specialists_make_routing_pay_against_the_reference(tmp_path):
    profile, queries = _pool(twin_correct_like_big=False)
    ctx = _stage_repo(tmp_path, profile, queries, **SECTIONS)
    report = _evaluate(ctx)
    deployed, test = report["deployed"], report["deployed"]["test"]
    assert deployed["singles"]["best_single"]["candidate"] == "big"
    assert deployed["singles"]["reference_single"]["candidate"] == "big"  # the specialists are half as accurate
    assert test["routing_gain_ci"][1] < 1.0 and test["routing"] == "routing saves energy over the reference single"
    assert test["noninferiority"] == "non-inferior"
    # the deployed λ sits on the decision grid and meets the target on the selection sweep
    grid = EvaluateConfig().decision_grid.lambdas
    assert any(abs(deployed["lam"] - lam) < 1e-12 for lam in grid) and deployed["met_on_selection"]
    sweep = deployed["selection_sweep"]
    k = sweep["lam"].index(deployed["lam"])
    assert sweep["accuracy"][k] >= sweep["best_single_accuracy"] - sweep["tolerance"] - 1e-12
    assert sweep["data"].startswith("train+val, cross-fitted")  # kNN and MF are cross-fitted over the folds
    # the headline everywhere: metrics.json, the compact headline, the report, the champion served at that λ
    metrics = json.loads((ctx.path("evaluate_dir") / "metrics.json").read_text())
    assert metrics["deployed"]["routing_gain"] == pytest.approx(test["routing_gain"])
    headline = json.loads(ctx.path("headline").read_text())
    assert headline["dep"]["lam"] == pytest.approx(round(deployed["lam"], 3)) and "hindsight_iso" in headline
    assert "## The deployed point" in (ctx.path("evaluate_dir") / "report.md").read_text()
    record = json.loads((ctx.path("evaluate_dir") / "champion" / "champion.json").read_text())
    assert record["lam"] == deployed["lam"] and record["lam_chosen_by"] == "iso_accuracy"
    from jouleroute.energy import make_meter
    from jouleroute.gateway.build import build_router
    from jouleroute.gateway.config import GatewayConfig

    served = build_router(ctx.params, GatewayConfig(), ctx.root, make_meter(ctx.params.energy))
    assert served.default_lam == pytest.approx(deployed["lam"])  # `jouleroute serve` serves the deployed point


def test_a_target_no_lambda_meets_deploys_the_closest_and_says_so():
    lams = [0.0, 0.1, 1.0]
    correct = np.array([[1, 1, 0], [1, 0, 0], [0, 0, 0], [1, 1, 1]], dtype=float)  # accuracy 0.75, 0.5, 0.25
    energy = np.array([[5, 3, 1]] * 4, dtype=float)
    best = (np.ones(4), np.full(4, 6.0))  # the best single is right everywhere: nothing reaches it
    choice = choose_deployed(RouterTarget(iso_accuracy=True), lams, correct, energy, *best, tolerance=0.01)
    assert not choice["met_on_selection"] and choice["lam"] == 0.0 and "no λ of the grid meets" in choice["reason"]
    reach = choose_deployed(RouterTarget(iso_accuracy=True), lams, correct, energy, np.full(4, 0.5), best[1], 0.01)
    assert reach["met_on_selection"] and reach["lam"] == 0.1  # the cheapest λ at 0.5 or above


def test_the_reference_is_the_cheapest_single_within_the_tolerance_of_the_best():
    correct = np.array([[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 0]], dtype=float)  # 1.0, 0.75, 0.25
    energy = np.array([[9, 2, 1]] * 4, dtype=float)
    assert pick_singles(correct, energy, tolerance=0.01) == (0, 0)
    assert pick_singles(correct, energy, tolerance=0.3) == (0, 1)


def test_score_deployed_pairs_the_resamples_and_states_the_verdicts():
    n = 400
    rng = np.random.default_rng(1)
    best = (rng.uniform(size=n) < 0.8).astype(float)
    out = score_deployed(best, np.full(n, 2.0), (best, np.full(n, 10.0)), (best, np.full(n, 4.0)), margin=0.03,
                         samples=200, confidence=0.95, seed=0)
    assert out["accuracy_diff_vs_best_ci"] == [0.0, 0.0] and out["noninferiority"] == "non-inferior"
    assert out["energy_share_of_best"] == pytest.approx(0.2) and out["routing_gain"] == pytest.approx(0.5)
    worse = score_deployed(best * 0, np.full(n, 2.0), (best, np.full(n, 10.0)), (best, np.full(n, 4.0)), 0.03,
                           200, 0.95, 0)
    assert worse["noninferiority"] == "inferior" and not worse["within_margin"] and worse["shortfall"] > 0.7
