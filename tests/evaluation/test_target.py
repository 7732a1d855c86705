"""A target instead of a λ: chosen on val, shown on test, resolved by `jouleroute serve`; unmeetable is reported."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pydantic import BaseModel

from jouleroute.commands.serve import with_target
from jouleroute.config import ParamsError
from jouleroute.evaluation import EvaluateConfig, RouterRun, run_evaluate
from jouleroute.evaluation.outcomes import build_matrix
from jouleroute.evaluation.target import choose_on_val, val_sweep
from jouleroute.gateway.build import build_router, target_lam
from jouleroute.gateway.config import GatewayConfig, GatewayRouterConfig
from jouleroute.paths import PathsConfig
from jouleroute.routing.lm.config import RouterConfig
from jouleroute.routing.scores import Scores
from jouleroute.routing.target import RouterTarget, TargetNotMet, choose_lambda, resolve_lambda

from .conftest import ENERGY, SKILL

LAMS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
# a val sweep: accuracy falls and energy falls as λ rises; best single: 0.80 at 10 J
ACC = [0.82, 0.81, 0.80, 0.76, 0.70, 0.60, 0.50]
JOULES = [9.0, 8.0, 6.0, 4.9, 4.0, 2.0, 1.0]


def test_an_energy_share_of_half_picks_the_most_accurate_lambda_that_meets_it_on_val():
    choice = choose_lambda(RouterTarget(energy_share=0.5), LAMS, ACC, JOULES, 0.80, 10.0)
    assert choice["met_on_val"] and choice["lam"] == 0.1  # 4.9 J <= 5 J, and more accurate than 0.2, 0.5, 1.0
    assert choice["val_energy_share"] == pytest.approx(0.49) and choice["val_accuracy"] == 0.76


def test_an_accuracy_floor_picks_the_cheapest_lambda_that_reaches_it():
    choice = choose_lambda(RouterTarget(accuracy_floor=0.8), LAMS, ACC, JOULES, 0.80, 10.0)
    assert choice["lam"] == 0.05 and choice["val_energy_share"] == pytest.approx(0.6)


def test_a_target_no_lambda_meets_is_reported_not_clipped():
    choice = choose_lambda(RouterTarget(energy_share=0.05), LAMS, ACC, JOULES, 0.80, 10.0)
    assert not choice["met_on_val"] and choice["lam"] is None
    assert choice["closest"] == {"lam": 1.0, "val_accuracy": 0.5, "val_energy_share": pytest.approx(0.1)}
    assert "no λ of the grid meets energy_share 0.05" in choice["reason"]
    sweep = {"lam": LAMS, "accuracy": ACC, "j_per_query": JOULES, "best_single_accuracy": 0.8,
             "best_single_j_per_query": 10.0}
    with pytest.raises(TargetNotMet, match="the most accurate λ \\(0.01\\) reaches 0.820"):
        resolve_lambda(RouterTarget(accuracy_floor=0.9), sweep)


def test_target_takes_exactly_one_goal():
    with pytest.raises(ValueError, match="exactly one"):
        RouterTarget()
    with pytest.raises(ValueError, match="exactly one"):
        RouterTarget(energy_share=0.5, accuracy_floor=0.8)
    assert RouterConfig.model_validate({"target": {"energy_share": 0.5}}).target.kind == "energy_share"


def _scores(data, noise: float) -> Scores:
    """P(correct) from a noisy difficulty, the candidates' mean energies: a router that decides at any λ."""
    rng = np.random.default_rng(5)
    ids = data["test_ids"]
    index = {q: i for i, q in enumerate(data["queries"]["query_id"])}
    est = np.array([data["difficulty"][index[q]] for q in ids]) + rng.normal(0, noise, len(ids))
    names = sorted(SKILL)
    merit = np.stack([(est < SKILL[c]).astype(float) for c in names], axis=1)
    energy = np.tile([ENERGY[c] for c in names], (len(ids), 1))
    return Scores.from_energy(ids, names, merit, energy, "max")


def test_evaluate_shows_how_test_met_the_lambda_val_chose(synthetic, tmp_path):
    lams = (0.01, 0.03, 0.1, 0.3, 0.6, 1.0, 3.0)
    scores = _scores(synthetic, 0.02)
    # the synthetic profile has no val split: its test queries stand in for val here, which is all a sweep reads
    m = build_matrix(synthetic["profile"], synthetic["queries"], "test", "energy_j")
    chosen = choose_on_val(RouterTarget(energy_share=0.5), val_sweep(m, scores, lams))
    assert chosen["choice"]["met_on_val"] and chosen["val_sweep"]["best_single"] == "large"
    runs = [RouterRun(f"util:{lam:g}", "util", lam, scores.decide(lam)) for lam in lams]
    cfg = EvaluateConfig(lambdas=lams, plots=False, bootstrap_samples=0)
    selection = {"winner": {"family": "util", "name": "util", "val_utility": 0.5}, "contenders": [], "lambdas": [],
                 "energy_norm": "max", "n_val_queries": 0, "target": chosen}
    result = run_evaluate(synthetic["profile"], synthetic["queries"], runs, cfg, tmp_path, selection=selection)
    test = result.metrics["target"]["test"]
    assert test["router"] == f"util:{chosen['choice']['lam']:g}"
    assert test["met_on_test"] is True and test["energy_share"] <= 0.5  # val and test are the same queries here
    assert "selection" in result.metrics and "target" not in result.metrics["selection"]
    assert "## A target instead of a λ" in (tmp_path / "report.md").read_text()


class _Params(BaseModel):
    """What target_lam and with_target read of the params (jouleroute.config.Params has it all)."""

    router: RouterConfig = RouterConfig()
    paths: PathsConfig = PathsConfig()


def test_serve_resolves_the_target_on_the_champions_val_sweep(tmp_path: Path):
    """The λ served for router.target is read off the val sweep saved with the champion (champion.json)."""
    sweep = {"lam": LAMS, "accuracy": ACC, "j_per_query": JOULES, "best_single": "big",
             "best_single_accuracy": 0.8, "best_single_j_per_query": 10.0, "n_queries": 100}
    params = with_target(_Params(), 0.5, None)
    assert target_lam(params, sweep, tmp_path) == 0.1
    with pytest.raises(TargetNotMet, match="no λ of the grid meets energy_share 0.05"):
        target_lam(with_target(params, 0.05, None), sweep, tmp_path)
    with pytest.raises(FileNotFoundError, match="champion's val sweep"):
        target_lam(params, None, tmp_path)
    with pytest.raises(ValueError, match="router.target is resolved on the champion's val sweep"):  # no champion
        build_router(params, GatewayConfig(router=GatewayRouterConfig(kind="mlp")), tmp_path, None)
    with pytest.raises(ParamsError, match="--target-energy-share"):
        with_target(_Params(), -1.0, None)


def test_the_evaluate_stage_chooses_the_target_lambda_on_val_and_reports_test(tmp_path):
    """The real stage (hashing embeddings, kNN, MF and task_best): the champion's val sweep, the
    λ that meets router.target there, its test point; and task_best's iso-accuracy share in metrics.json."""
    from jouleroute.stages.evaluate import evaluate_stage

    from .test_selection import _data, _stage_repo

    profile, queries = _data()
    ctx = _stage_repo(tmp_path, profile, queries, router={"target": {"energy_share": 0.6}},
                      baselines={"families": ["knn", "mf", "task_best"], "embedding": {"model": "hashing"}})
    report = evaluate_stage(ctx).report
    target, family = report["target"], report["selection"]["winner"]["family"]
    sweep = target["val_sweep"]
    assert target["family"] == family and sweep["n_queries"] == 30 and sweep["lam"] == list(ctx.params.evaluate.lambdas)
    again = choose_lambda(RouterTarget(energy_share=0.6), sweep["lam"], sweep["accuracy"], sweep["j_per_query"],
                          sweep["best_single_accuracy"], sweep["best_single_j_per_query"])
    assert target["choice"] == again
    if again["met_on_val"]:
        assert target["test"]["router"] == f"{family}:{again['lam']:g}"
        assert target["test"]["met_on_test"] in (True, False)
    else:
        assert target["test"]["met_on_test"] is None
    metrics = json.loads((ctx.path("evaluate_dir") / "metrics.json").read_text())
    assert "task_best" in metrics["routers"] and "task_best" in metrics["iso_accuracy"]["policies"]
    assert metrics["iso_accuracy"]["champion"]["family"] == family
    energy = report["selection"]["query_energy"]  # ê_c(x) measured on val, adopted per family by val utility
    assert set(energy["families"]) == {"knn", "mf"} and energy["n_val_queries"] == 30
    assert all(row["adopted"] == (row["val_utility_per_query"] > row["val_utility_own"] + 1e-12)
               for row in energy["families"].values())
    assert "## Per-query energy, on val" in (ctx.path("evaluate_dir") / "report.md").read_text()
