"""The deployed point (evaluation/deployed.py, deployment.py): every choice on selection data, scored once on test.

The stage tests run the real evaluate stage on small synthetic profiles (real router_data val rows, real kNN and
MF fitted on hashing embeddings, nothing downloaded; tracking off, as in test_val_contest.py).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from jouleroute.evaluation.config import EvaluateConfig
from jouleroute.policy.route import choose_deployed, score_deployed
from jouleroute.policy.singles import pick_singles
from jouleroute.policy.target import Target as RouterTarget
from tests.evaluation.conftest import profile_rows
from tests.evaluation.test_val_contest import _data, _stage_repo

CHOICES = ("champion", "family", "chosen_by", "lam", "met_on_selection", "singles", "selection_sweep", "stability",
           "policy", "single", "contenders", "routing_on_selection", "deployed", "kinds", "single_on_selection",
           "kind_stability")


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
    assert before["val_contest"]["winner"] == after["val_contest"]["winner"]
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
    ctx = _stage_repo(tmp_path, profile, queries, **SECTIONS)
    report = _evaluate(ctx)
    deployed = report["deployed"]
    assert deployed["singles"]["reference_single"]["candidate"] == "twin"
    # a router can only match the twin here: its saving on selection is within noise, so the twin is deployed
    assert deployed["policy"] == "single" and deployed["single"] == "twin" and not deployed["routing_on_selection"]["pays"]
    test = deployed["test"]
    assert test["accuracy_diff_vs_best"] == pytest.approx(0.0) and test["view"] == "with_overhead"
    models = test["models_only"]  # the router's choices: the twin's energy, so no gain
    low, high = models["routing_gain_ci"]
    assert low <= 1.0 <= high and models["routing"] == "tie with the reference single"
    # counting the router's own metered cost, routing can only cost more than asking the twin directly
    assert test["routing_gain"] >= models["routing_gain"]
    # every stability figure with the count it was measured on (evaluate.stability_samples: 50), the choice across
    # kinds included; metrics.json's flag is the deployed policy's, the champion's λ apart
    report_md = (ctx.path("evaluate_dir") / "report.md").read_text()
    assert deployed["kind_stability"]["samples"] == 50 and "of 50 resamples" in report_md
    assert "of 200 resamples" not in report_md
    dep = json.loads((ctx.path("evaluate_dir") / "metrics.json").read_text())["deployed"]
    assert dep["met_on_selection"] is deployed["met_on_selection_across_kinds"] is True
    assert dep["champion_met_on_selection"] is deployed["met_on_selection"]
    from jouleroute.energy import make_meter
    from jouleroute.gateway.router_build import build_router
    from jouleroute.gateway.config import GatewayConfig
    from jouleroute.gateway.routers import Query

    served = build_router(ctx.params, GatewayConfig(), ctx.root, make_meter(ctx.params.energy))
    lam = served.default_lam
    assert served.rank([Query("alpha alpha question", "mmlu", lam)])[0].ranking[0] == "twin"  # every query to it


def test_a_best_single_drawing_no_energy_stops_evaluate_with_one_line_naming_the_profile(tmp_path):
    """Every energy share is a share of the best single's J/query: at 0 (a net-of-idle column can sum to it) evaluate
    stops before deciding, naming the profile, the column and the model, instead of dividing by zero."""
    profile, queries = _pool(twin_correct_like_big=True)
    profile.loc[profile["candidate_id"] == "big", "energy_j"] = 0.0
    ctx = _stage_repo(tmp_path, profile, queries, **SECTIONS)
    with pytest.raises(ValueError, match=r"profile\.parquet: column 'energy_j': the best single big averages 0 "
                                         r"J/query over the \d+ selection queries"):
        _evaluate(ctx)


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
    assert deployed["policy"] == "route" and deployed["routing_on_selection"]["j_ratio_ci"][1] < 1.0
    assert "## The deployed point" in (ctx.path("evaluate_dir") / "report.md").read_text()
    record = json.loads((ctx.path("evaluate_dir") / "champion" / "champion.json").read_text())
    assert record["lam"] == deployed["lam"] and record["lam_chosen_by"] == "iso_accuracy"
    from jouleroute.energy import make_meter
    from jouleroute.gateway.router_build import build_router
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


def _sweep(name: str, correct: np.ndarray, energy: np.ndarray, best: tuple, overhead: float = 0.0):
    from jouleroute.policy.route import ContenderSweep

    ids = [f"q{i}" for i in range(len(correct))]
    return ContenderSweep(name, name, "train+val", ids, correct, energy, best[0], best[1], overhead)


def _selection(correct: np.ndarray, energy: np.ndarray, candidates: list[str]):
    from jouleroute.evaluation.outcomes import ProfileMatrix

    n = len(correct)
    return ProfileMatrix(query_ids=[f"q{i}" for i in range(n)], tasks=np.array(["t"] * n), candidates=candidates,
                         correct=correct, energy_j=energy, latency_s=np.ones_like(energy),
                         source=np.full(energy.shape, "modelled"))


def test_routing_that_its_own_cost_eats_deploys_the_reference_single_and_a_cheaper_contender_is_champion():
    """The router's own J/query counts on selection data: a saving it eats is no saving; among contenders, the one
    whose deployed point is cheapest at the target is the champion, whichever came first."""
    from jouleroute.evaluation.router_champion import choose_policy

    rng = np.random.default_rng(0)
    n, lams = 400, [0.0, 0.5]
    kind = rng.integers(0, 2, n)
    # big answers all at 10 J; two specialists at 1 J each answer half; a perfect router pays 1 J
    m = _selection(np.stack([np.ones(n), kind == 1, kind == 0], axis=1).astype(float),
                   np.tile([10.0, 1.0, 1.0], (n, 1)), ["big", "alpha", "beta"])
    best = (m.correct[:, 0], m.energy_j[:, 0])
    perfect = np.where(kind == 1, 1, 2)
    right = np.ones((n, 2))
    sloppy = _sweep("sloppy", right, np.full((n, 2), 6.0), best)  # right everywhere at 6 J: half the big's saving
    sharp = _sweep("sharp", right, np.full((n, 2), 1.0), best)
    target = RouterTarget(iso_accuracy=True)
    decided = choose_policy(target, lams, [sloppy, sharp], m, 0.01, samples=100)
    assert decided["champion"] == "sharp" and decided["policy"] == "route" and decided["stability"]["champion"] == 1.0
    assert decided["single"] == "big" and decided["routing_on_selection"]["j_ratio"] == pytest.approx(0.1)
    costly = _sweep("sharp", right, m.energy_j[np.arange(n)[:, None], np.stack([perfect] * 2, axis=1)], best,
                    overhead=9.5)  # its own cost brings it to 10.5 J/query: more than asking big
    decided = choose_policy(target, lams, [costly], m, 0.01, samples=100)
    assert decided["policy"] == "single" and decided["single"] == "big" and not decided["routing_on_selection"]["pays"]
    assert decided["contenders"][0]["energy_share_of_best"] == pytest.approx(1.05)


def test_a_router_missing_the_target_deploys_the_single_that_meets_it():
    from jouleroute.evaluation.router_champion import choose_policy

    n = 200
    m = _selection(np.stack([np.ones(n), np.zeros(n)], axis=1), np.tile([10.0, 1.0], (n, 1)), ["big", "small"])
    half = np.zeros((n, 2))
    half[::2] = 1  # 50% accurate at every λ, however cheap
    decided = choose_policy(RouterTarget(iso_accuracy=True), [0.0, 1.0],
                            [_sweep("r", half, np.ones((n, 2)), (m.correct[:, 0], m.energy_j[:, 0]))], m, 0.01, 50)
    assert not decided["contenders"][0]["met_on_selection"]
    assert decided["policy"] == "single" and decided["single"] == "big"


def test_a_router_scored_without_a_meter_counts_no_own_cost_and_caches_nothing(tmp_path):
    """An LM router loaded without a meter reports NaN overhead: the deployment counts none (a warning says so) and
    never writes NaN into the overhead cache that later runs reuse."""
    from types import SimpleNamespace

    from jouleroute.evaluation.deployment import _overhead

    setup = SimpleNamespace(params=SimpleNamespace(evaluate=SimpleNamespace(include_overhead=True)),
                            overhead_cache=tmp_path / "overhead")
    contest = SimpleNamespace(overhead_keys={"lm": {"router": "lm"}})
    unmetered = SimpleNamespace(overhead_energy_j=[float("nan")] * 3, query_ids=["a", "b", "c"])
    assert _overhead(setup, contest, "lm", unmetered) == 0.0 and not (tmp_path / "overhead").exists()
