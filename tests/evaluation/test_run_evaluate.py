"""run_evaluate end to end on a synthetic profile: outputs, plots, energy-source rules, config."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from matplotlib.image import imread

from jouleroute.energy import EnergyPolicy
from jouleroute.evaluation import EvaluateConfig, MixedEnergySourcesError, RouterRun, oracle_choices, run_evaluate
from jouleroute.routing.base import RoutingDecisions

from .conftest import EVAL_CFG, make_runs, utility_router

CFG = EVAL_CFG


@pytest.fixture(scope="module")
def evaluated(evaluated):
    return evaluated[0]


def test_outputs_written(evaluated):
    paths = evaluated.paths
    metrics = json.loads(paths["metrics"].read_text())
    assert metrics["energy_source"] == "estimated" and metrics["n_queries"] == 60
    assert set(metrics["singles"]) == {"small", "medium", "large"}
    r = metrics["routers"]["random"]
    assert {"accuracy", "j_per_query", "j_per_query_models_only", "aiq", "pgr", "savings_captured_pct",
            "on_frontier", "energy_source"} <= set(r)
    report = json.loads(paths["report"].read_text())
    assert report["provenance"] == {"git_sha": "abc123", "params_hash": "p1"}
    assert set(report["routers"]["utility@0.1"]["views"]) == {"models_only", "with_overhead"}
    md = paths["markdown"].read_text()
    assert "J/query [estimated]" in md and "oracle" in md and "utility@0.1" in md
    with paths["sweep"].open() as fh:
        rows = list(csv.DictReader(fh))
    assert [float(r["lam"]) for r in rows] == list(CFG.lambdas)
    assert all(r["energy_source"] == "estimated" for r in rows)


def test_overhead_is_reported_on_top_of_model_energy(evaluated):
    r = evaluated.report["routers"]["utility@0.1"]["views"]
    assert r["with_overhead"]["j_per_query"] == pytest.approx(r["models_only"]["j_per_query"] + 0.01)
    assert r["with_overhead"]["latency_p50_s"] > r["models_only"]["latency_p50_s"]
    assert r["models_only"]["accuracy"] == r["with_overhead"]["accuracy"]


def test_single_and_oracle_figures_match_the_profile(evaluated, synthetic):
    test = synthetic["profile"][synthetic["profile"]["split"] == "test"]
    large = test[test["candidate_id"] == "large"]
    single = evaluated.report["singles"]["large"]["views"]["models_only"]
    assert single["accuracy"] == pytest.approx(large["correct"].mean())
    assert single["j_per_query"] == pytest.approx(large["energy_j"].mean())
    oracle = evaluated.report["oracle"]["views"]["models_only"]
    assert oracle["accuracy"] == pytest.approx(test.groupby("query_id")["correct"].max().mean())
    assert oracle["j_per_query"] < single["j_per_query"]


def test_sweep_finds_the_transition(evaluated):
    fam = evaluated.report["families"]["utility"]
    acc = fam["sweep"]["accuracy"]
    assert acc[0] > acc[-1] + 0.2  # penalising energy trades accuracy away
    assert fam["sweep"]["expensive_share"][0] > 0.1 and fam["sweep"]["expensive_share"][-1] == 0.0
    # large costs ~11 J more than small at ~0.25 extra accuracy: it stops paying off around lambda ~ 0.02-0.1
    assert 0.003 <= fam["lambda_star"] <= 0.3
    assert fam["views"]["with_overhead"]["aiq"] >= evaluated.report["views"]["with_overhead"]["aiq_zero_router"]


def test_plots_are_non_empty_pngs(evaluated):
    plots = {k: v for k, v in evaluated.paths.items() if k.startswith("plot_")}
    assert set(plots) == {"plot_accuracy_vs_energy", "plot_lambda_sweep", "plot_routing_mix_utility",
                          "plot_routing_mix_random", "plot_lambda_star_by_task"}
    for path in plots.values():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        image = imread(path)
        assert image.shape[0] > 200 and image.shape[1] > 200 and float(np.std(image)) > 0.01  # not blank


def test_mixed_profile_sources_are_refused_unless_allowed(synthetic, tmp_path):
    profile = synthetic["profile"].copy()
    profile.loc[profile["candidate_id"] == "large", "energy_source"] = "modelled"
    runs = make_runs(synthetic, CFG)[-1:]
    with pytest.raises(MixedEnergySourcesError, match="estimated.*modelled.*allow_mixed_sources"):
        run_evaluate(profile, synthetic["queries"], runs, CFG, tmp_path / "a")
    cfg = CFG.model_copy(update={"plots": False})
    result = run_evaluate(profile, synthetic["queries"], runs, cfg, tmp_path / "b",
                          energy=EnergyPolicy(allow_mixed_sources=True))
    assert result.metrics["energy_source"] == "mixed:estimated+modelled"
    assert result.report["energy_policy"]["allow_mixed_sources"] is True
    assert result.metrics["singles"]["large"]  # still reported
    assert result.report["singles"]["large"]["views"]["models_only"]["energy_source"] == "modelled"
    assert "Warning" in result.paths["markdown"].read_text()


def test_overhead_measured_with_another_source(synthetic, tmp_path):
    runs = [RouterRun("u", "u", None, utility_router(synthetic, 0.05, source="measured-rapl"))]
    with pytest.raises(MixedEnergySourcesError, match="include_overhead: false"):
        run_evaluate(synthetic["profile"], synthetic["queries"], runs, CFG, tmp_path / "a")
    cfg = CFG.model_copy(update={"include_overhead": False, "plots": False})
    result = run_evaluate(synthetic["profile"], synthetic["queries"], runs, cfg, tmp_path / "b")
    assert "skipped" in result.report["views"]["with_overhead"]
    assert result.metrics["energy_source"] == "estimated"


def test_bad_router_input_is_named(synthetic, tmp_path):
    ids = synthetic["test_ids"]
    short = RouterRun("short", "x", None, RoutingDecisions(ids[:-1], ["small"] * (len(ids) - 1)))
    with pytest.raises(ValueError, match="router 'short' must decide exactly the evaluation queries"):
        run_evaluate(synthetic["profile"], synthetic["queries"], [short], CFG, tmp_path)
    alien = RouterRun("alien", "x", None, RoutingDecisions(ids, ["huge"] * len(ids)))
    with pytest.raises(ValueError, match=r"router 'alien' chose candidate\(s\) \['huge'\]"):
        run_evaluate(synthetic["profile"], synthetic["queries"], [alien], CFG, tmp_path)
    partial = make_runs(synthetic, CFG)[:5]  # a family run at only 5 of the 9 lambdas
    with pytest.raises(ValueError, match="family 'utility' was run at lambda="):
        run_evaluate(synthetic["profile"], synthetic["queries"], partial, CFG, tmp_path)


def test_config_is_strict():
    with pytest.raises(ValueError, match="at least 7"):
        EvaluateConfig(lambdas=[0.1, 1, 10])
    with pytest.raises(ValueError, match="strictly increasing"):
        EvaluateConfig(lambdas=[1, 2, 3, 4, 5, 6, 50, 40])
    with pytest.raises(ValueError, match="one decade"):
        EvaluateConfig(lambdas=[1, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6])
    with pytest.raises(ValueError, match="> 0"):
        EvaluateConfig(lambdas=[0, 1, 2, 3, 4, 5, 60])
    with pytest.raises(ValueError):
        EvaluateConfig(accuracy_tolerence=0.02)


def test_an_oracle_router_equals_the_builtin_oracle(synthetic, tmp_path):
    ids = synthetic["test_ids"]
    choices = oracle_choices(synthetic["profile"])
    runs = [RouterRun("oracle", "oracle", None, RoutingDecisions(ids, [choices[q] for q in ids])),
            RouterRun("small", "always", None, RoutingDecisions(ids, ["small"] * len(ids)))]  # names may repeat kinds
    cfg = CFG.model_copy(update={"plots": False, "bootstrap_samples": 0})
    metrics = run_evaluate(synthetic["profile"], synthetic["queries"], runs, cfg, tmp_path).metrics
    router, oracle = metrics["routers"]["oracle"], metrics["oracle"]
    assert (router["accuracy"], router["j_per_query"]) == (oracle["accuracy"], oracle["j_per_query"])
    assert router["savings_captured_pct"] == pytest.approx(100.0)  # the sanity check accepts a tie
    assert metrics["routers"]["small"]["j_per_query"] == metrics["singles"]["small"]["j_per_query"]


def test_the_report_explains_oracle_savings_and_their_negative_values(evaluated):
    """A value like -142.6 in "% oracle savings captured" was unexplained: the report states the formula, this
    run's two ends (best single, oracle) and what a negative value means, counting the routers that have one."""
    report = json.loads(evaluated.paths["report"].read_text())
    view = report["headline_view"]
    values = [r["views"][view]["savings_captured_pct"] for r in report["routers"].values()]
    negative = sum(1 for v in values if v is not None and v < 0)
    md = evaluated.paths["markdown"].read_text()
    note = next(line for line in md.splitlines() if line.startswith("% oracle savings captured = 100"))
    best = report["views"][view]["best_single"]
    assert f"(`{best}`)" in note and "below 0" in note and "spends more J/query" in note
    assert (f"{negative} router(s) here" if negative else "none here") in note
