"""The compact headline (metrics.json: `dvc metrics show`, `dvc exp show`): the deployed policy's decision
figures, narrow enough that the seven pipelines' rows fit a terminal (issue 50)."""

from __future__ import annotations

import copy

from jouleroute.evaluation.headline import LM_ALONE, headline


def test_the_compact_headline_is_the_decision_and_no_family_table(evaluated):
    """Families (a diagnostic one like `lm_alone` included), intervals and cascades stay in evaluate's
    metrics.json: with them the seven pipelines' `dvc metrics show` grew to 549 columns."""
    result, _, _ = evaluated
    metrics = copy.deepcopy(result.metrics)
    families = metrics["families"]
    assert families, "the synthetic evaluation sweeps families"
    metrics["families"] = families | {LM_ALONE: copy.deepcopy(next(iter(families.values())))}
    out = headline(metrics, 0.5)
    assert "aiq" not in out and "cas" not in out and LM_ALONE == "lm_alone"
    assert set(out) >= {"oracle", "source"}
    flat = [f"{k}.{kk}" if isinstance(v, dict) else k for k, v in out.items() for kk in (v if isinstance(v, dict)
                                                                                           else [None])]
    assert not any("_ci" in key for key in flat), flat


def test_the_deployed_policy_leads_the_compact_headline():
    """With a deployed point: its kind and name, a route's λ (none for a single model), the decision figures."""
    deployed = {"policy": "single", "single": "big", "champion": "mf", "lam": 0.1, "accuracy": 0.8,
                "accuracy_diff_vs_best": 0.0, "energy_share_of_best": 1.0, "routing_gain": 1.0,
                "noninferiority": "non-inferior", "best_single": "big"}
    metrics = {"energy_source": "modelled", "singles": {"big": {"accuracy": 0.8, "j_per_query": 2.0}},
               "oracle": {"accuracy": 0.9, "j_per_query": 1.0}, "aiq_zero_router": 0.7, "routers": {},
               "deployed": deployed}
    single = headline(metrics, 0.5)["dep"]
    assert single["kind"] == "single" and single["name"] == "big" and "lam" not in single
    routed = headline(metrics | {"deployed": deployed | {"policy": "route"}}, 0.5)["dep"]
    assert routed["kind"] == "route" and routed["name"] == "mf" and routed["lam"] == 0.1
