"""A target instead of a λ: chosen on selection data, resolved by `jouleroute serve`; unmeetable is reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from jouleroute.commands.serve import with_target
from jouleroute.config import ParamsError
from jouleroute.gateway.router_build import build_router, target_lam
from jouleroute.gateway.config import GatewayConfig, GatewayRouterConfig
from jouleroute.paths import PathsConfig
from jouleroute.policy.meet import choose_lambda, resolve_lambda
from jouleroute.policy.router_section import RouterSection as RouterConfig
from jouleroute.policy.target import Target as RouterTarget, TargetNotMet


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
    with pytest.raises(TargetNotMet, match="the most accurate reaches 0.8200 \\(at λ=0.01\\)"):
        resolve_lambda(RouterTarget(accuracy_floor=0.9), sweep)


def test_target_takes_exactly_one_goal():
    with pytest.raises(ValueError, match="exactly one"):
        RouterTarget()
    with pytest.raises(ValueError, match="exactly one"):
        RouterTarget(energy_share=0.5, accuracy_floor=0.8)
    assert RouterConfig.model_validate({"target": {"energy_share": 0.5}}).target.kind == "energy_share"


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


def test_an_iso_accuracy_target_is_the_best_singles_accuracy_minus_the_tolerance():
    choice = choose_lambda(RouterTarget(iso_accuracy=True), LAMS, ACC, JOULES, 0.82, 10.0, tolerance=0.02)
    assert choice["lam"] == 0.05 and choice["value"] == pytest.approx(0.80)  # the cheapest at 0.80 or above
    assert RouterTarget(iso_accuracy=True).kind == "iso_accuracy"


def test_the_evaluate_stage_chooses_an_explicit_target_on_the_selection_sweep(tmp_path):
    """The real stage (hashing embeddings, kNN, MF and task_best) with router.target set: the deployed λ is the one
    that meets it on the champion's selection sweep, and task_best's hindsight share stays in metrics.json."""
    from jouleroute.stages.evaluate import evaluate_stage

    from .test_val_contest import _data, _stage_repo

    profile, queries = _data()
    ctx = _stage_repo(tmp_path, profile, queries, router={"target": {"energy_share": 0.6}},
                      baselines={"families": ["knn", "mf", "task_best"], "embedding": {"model": "hashing"}})
    report = evaluate_stage(ctx).report
    deployed, family = report["deployed"], report["val_contest"]["winner"]["family"]
    sweep = deployed["selection_sweep"]
    assert deployed["family"] == family and deployed["chosen_by"] == "energy_share" and sweep["n_queries"] == 90
    again = choose_lambda(RouterTarget(energy_share=0.6), sweep["lam"], sweep["accuracy"], sweep["j_per_query"],
                          sweep["best_single_accuracy"], sweep["best_single_j_per_query"])
    assert deployed["met_on_selection"] == again["met_on_val"]
    assert deployed["lam"] == (again["lam"] if again["met_on_val"] else again["closest"]["lam"])
    metrics = json.loads((ctx.path("evaluate_dir") / "metrics.json").read_text())
    assert "task_best" in metrics["routers"] and "task_best" in metrics["iso_accuracy"]["policies"]
    assert metrics["iso_accuracy"]["champion"]["family"] == family
    energy = report["val_contest"]["query_energy"]  # ê_c(x) measured on val, adopted per family by val utility
    assert set(energy["families"]) == {"knn", "mf"} and energy["n_val_queries"] == 30
    assert all(row["adopted"] == (row["val_utility_per_query"] > row["val_utility_own"] + 1e-12)
               for row in energy["families"].values())
    assert "## Per-query energy, on val" in (ctx.path("evaluate_dir") / "report.md").read_text()
