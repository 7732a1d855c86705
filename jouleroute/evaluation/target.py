"""A target instead of a λ, on both sides: the champion's val sweep the λ is chosen from, and how test met it.

The choice rule is ``routing.target.choose_lambda`` (the gateway resolves a target with the same rule).
Energies here are the models' J/query (router overhead excluded), on val and on test alike, so a share
means the same thing on both; docs/metrics.md.
"""

from __future__ import annotations

from typing import Sequence

import dataclasses
import numpy as np

from jouleroute.evaluation.frontier import Point, cheapest_and_best
from jouleroute.evaluation.outcomes import NO_SOURCE, ProfileMatrix, RouterRun, router_outcome, single_outcomes
from jouleroute.routing.scores import Scores
from jouleroute.routing.target import RouterTarget, choose_lambda


def val_sweep(m: ProfileMatrix, scores: Scores, lambdas: Sequence[float]) -> dict:
    """The champion's val accuracy and models' J/query at each λ, and the best single model on val."""
    singles = [Point(o.name, float(np.mean(o.energy_j)), float(np.mean(o.correct))) for o in single_outcomes(m)]
    _, best = cheapest_and_best(singles)
    accuracy, joules = [], []
    for lam in lambdas:
        # the target compares the models' energy only: the router's own overhead (measured on this machine, and
        # possibly unmeasurable on a val pass, NaN) is left out, as the docs say
        decided = dataclasses.replace(scores.decide(lam), overhead_energy_j=[], overhead_latency_s=[],
                                      overhead_energy_source=NO_SOURCE)
        o = router_outcome(m, RouterRun(f"val:{lam:g}", "val", float(lam), decided))
        accuracy.append(float(np.mean(o.correct)))
        joules.append(float(np.mean(o.energy_j)))
    return {"lam": [float(x) for x in lambdas], "accuracy": accuracy, "j_per_query": joules,
            "best_single": best.name, "best_single_accuracy": best.accuracy, "best_single_j_per_query": best.energy,
            "n_queries": len(m.query_ids)}


def choose_on_val(target: RouterTarget | None, sweep: dict) -> dict:
    """``{"val_sweep": ..., "choice": ...}``; the choice is absent without a target."""
    out = {"val_sweep": sweep}
    if target is not None:
        out["choice"] = choose_lambda(target, sweep["lam"], sweep["accuracy"], sweep["j_per_query"],
                                      sweep["best_single_accuracy"], sweep["best_single_j_per_query"])
    return out


def on_test(report: dict, family: str, chosen: dict) -> dict:
    """How test met the target at the λ val chose: the champion family's test point at that λ (models only)."""
    choice = chosen.get("choice")
    if not choice:
        return {}
    best = report["views"]["models_only"]["best_single"]
    best_j = report["singles"][best]["views"]["models_only"]["j_per_query"]
    best_acc = report["singles"][best]["views"]["models_only"]["accuracy"]
    out = {"best_single": best, "best_single_accuracy": best_acc, "best_single_j_per_query": best_j}
    if choice["lam"] is None:
        return out | {"met_on_test": None}
    sweep = report.get("families", {}).get(family, {}).get("sweep")
    if not sweep or not any(abs(lam - choice["lam"]) <= 1e-12 * max(1.0, lam) for lam in sweep["lam"]):
        return out | {"met_on_test": None, "note": f"no test point of family '{family}' at λ={choice['lam']:g}"}
    k = min(range(len(sweep["lam"])), key=lambda i: abs(sweep["lam"][i] - choice["lam"]))
    view = report["routers"][sweep["router"][k]]["views"]["models_only"]
    share = view["j_per_query"] / best_j if best_j > 0 else None
    met = (share is not None and share <= choice["value"] + 1e-12) if choice["kind"] == "energy_share" \
        else view["accuracy"] >= choice["value"] - 1e-12
    return out | {"router": sweep["router"][k], "accuracy": view["accuracy"], "j_per_query": view["j_per_query"],
                  "energy_share": share, "met_on_test": bool(met)}
