"""The deployed point: every choice made on selection data (train and val), then scored once on test.

A deployed system fixes its λ and knows its reference model before it sees a query, so:

- **best single**: the most accurate candidate on the selection queries (train and val rows of the profile that
  every candidate answered; ties to the cheaper);
- **reference single**: the cheapest candidate whose selection accuracy is within ``evaluate.accuracy_tolerance``
  of the best single's: what a user picks from the tournament alone, without a router;
- **deployed λ**: the champion's λ on ``evaluate.decision_grid`` that meets ``router.target`` (default
  ``iso_accuracy``: accuracy at least the best single's minus the tolerance) on the champion's selection sweep:
  a learned baseline family cross-fitted over ``evaluate.selection_folds`` folds of train+val (each query scored
  by a router that never saw it), the LM router on val (its cost);
- **stability**: the share of bootstrap resamples of the selection data that make the same choice.

``score_deployed`` then scores the deployed point on test against the best and the reference single with paired
bootstrap intervals: the accuracy difference, the energy share of the best single, and the **routing gain**
(J/query of the deployed point over the reference single's). Nothing here reads a test outcome before a choice
is made; the shuffle test in tests/evaluation/test_deployed.py holds that. docs/metrics.md, "The deployed point".
"""

from __future__ import annotations

import logging
from typing import Sequence

import numpy as np
import pandas as pd

from jouleroute.evaluation.outcomes import ProfileMatrix, build_matrix
from jouleroute.policy.compare import accuracy_intervals, compare, energy_verdict, lower_ends
from jouleroute.policy.meet import choose_lambda
from jouleroute.policy.singles import pick_singles
from jouleroute.policy.target import Target
from jouleroute.routing.scores import RoutingDecisions
from jouleroute.stats import percentile_interval, resample_index

logger = logging.getLogger(__name__)

SELECTION_SPLITS = ("train", "val")
ABOVE_BEST_SAMPLES = 200  # resamples of each λ's interval when router.target is above_best
_EPS = 1e-12


def selection_matrix(profile: pd.DataFrame, queries: pd.DataFrame, energy_column: str,
                     only: Sequence[str] | None = None) -> ProfileMatrix:
    """The train and val queries (or ``only`` these) that every candidate of the profile answered, as one matrix."""
    chosen = queries[queries["split"].isin(SELECTION_SPLITS)]
    if only is not None:
        chosen = chosen[chosen["query_id"].isin(set(only))]
    rows = profile[profile["query_id"].isin(set(chosen["query_id"]))]
    counts = rows.groupby("query_id")["candidate_id"].nunique()
    full = set(counts[counts == profile["candidate_id"].nunique()].index)
    if not full:
        raise ValueError("no train or val query was answered by every candidate: nothing to choose the deployed "
                         "point on (the profile's train and val rows)")
    return build_matrix(rows, chosen[chosen["query_id"].isin(full)].assign(split="selection"), "selection",
                        energy_column)


def singles_on_selection(m: ProfileMatrix, tolerance: float, samples: int, seed: int) -> dict:
    """The best and the reference single on the selection matrix, their figures, and how stable each choice is."""
    best, ref = pick_singles(m.correct, m.energy_j, tolerance)
    figures = lambda c: {"candidate": m.candidates[c], "accuracy": float(m.correct[:, c].mean()),  # noqa: E731
                         "j_per_query": float(m.energy_j[:, c].mean())}
    out = {"best_single": figures(best), "reference_single": figures(ref), "n_queries": len(m.query_ids),
           "tolerance": tolerance}
    if samples > 0:
        picks = [pick_singles(m.correct[i], m.energy_j[i], tolerance) for i in resample_index(len(m.query_ids),
                                                                                              samples, seed)]
        out["stability"] = {"best_single": float(np.mean([b == best for b, _ in picks])),
                            "reference_single": float(np.mean([r == ref for _, r in picks])), "samples": samples}
    return out


def sweep_outcomes(m: ProfileMatrix, choices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[queries, λ] correctness and energy of a router's choices ([queries, λ] column indices of ``m``)."""
    rows = np.arange(len(m.query_ids))[:, None]
    return m.correct[rows, choices], m.energy_j[rows, choices]


def choose_deployed(target: Target, lams: Sequence[float], correct: np.ndarray, energy: np.ndarray,
                    best_correct: np.ndarray, best_energy: np.ndarray, tolerance: float, samples: int = 0,
                    seed: int = 0) -> dict:
    """The λ of ``lams`` that meets ``target`` on the selection sweep (``correct``/``energy``: [queries, λ] of the
    champion's choices; ``best_*``: the best single's outcomes on the same queries). When none does, the closest
    λ is deployed and ``met_on_selection`` is false. With ``samples``, the share of resamples choosing the same λ."""
    def choose(rows) -> dict:
        bounds = (lower_ends(accuracy_intervals(correct[rows], best_correct[rows], ABOVE_BEST_SAMPLES, 0.95, seed))
                  if target.kind == "above_best" else None)  # above_best reads each λ's paired interval
        return choose_lambda(target, list(lams), list(correct[rows].mean(axis=0)), list(energy[rows].mean(axis=0)),
                             float(best_correct[rows].mean()), float(best_energy[rows].mean()), tolerance,
                             bounds) | {"bounds": bounds}

    everything = np.arange(correct.shape[0])
    choice = choose(everything)
    lam = choice["lam"] if choice["met_on_val"] else choice["closest"]["lam"]
    out = {"target": target.kind, "floor_or_share": choice["value"], "lam": float(lam),
           "met_on_selection": bool(choice["met_on_val"]), "reason": choice.get("reason")}
    if choice["bounds"] is not None:
        out["accuracy_diff_vs_best_lower"] = choice["bounds"][list(lams).index(lam)]
    if samples > 0:
        again = [choose(rows) for rows in resample_index(len(everything), samples, seed)]
        chosen = np.array([c["lam"] if c["met_on_val"] else c["closest"]["lam"] for c in again])
        out["stability"] = {"lam": float(np.mean(chosen == lam)), "samples": samples,  # on a fine grid: the spread too
                            "lam_interval": percentile_interval(chosen, 0.9)}
    return out


def score_deployed(correct: np.ndarray, energy: np.ndarray, best: tuple[np.ndarray, np.ndarray],
                   reference: tuple[np.ndarray, np.ndarray], margin: float, samples: int, confidence: float,
                   seed: int) -> dict:
    """The deployed point on test against the best and the reference single (per-query arrays, one view of
    energy): two paired comparisons (policy/compare.py) on one set of resamples, and the verdicts they support."""
    vs_best = compare(correct, energy, *best, margin, samples, confidence, seed)
    vs_ref = compare(correct, energy, *reference, margin, samples, confidence, seed)
    out = {"accuracy": vs_best["accuracy"], "j_per_query": vs_best["j_per_query"],
           "best_accuracy": vs_best["reference_accuracy"], "best_j_per_query": vs_best["reference_j_per_query"],
           "reference_accuracy": vs_ref["reference_accuracy"], "reference_j_per_query": vs_ref["reference_j_per_query"],
           "n_queries": len(correct), "samples": samples, "confidence": confidence, "noninferiority_margin": margin}
    for name, (vs, key) in {"accuracy_diff_vs_best": (vs_best, "accuracy_diff"),
                            "energy_share_of_best": (vs_best, "energy_ratio"),
                            "accuracy_diff_vs_reference": (vs_ref, "accuracy_diff"),
                            "routing_gain": (vs_ref, "energy_ratio")}.items():
        out[name], out[f"{name}_ci"] = vs[key], vs[f"{key}_ci"]
    diff = out["accuracy_diff_vs_best"]
    routing = {"untested": "not tested (no bootstrap)", "cheaper": "routing saves energy over the reference single",
               "dearer": "routing costs more than the reference single",
               "tie": "tie with the reference single"}[energy_verdict(out["routing_gain_ci"])]
    return out | {"noninferiority": vs_best["verdict"], "within_margin": diff >= -margin - _EPS,
                  "shortfall": max(0.0, -margin - diff),
                  "routing": routing if out["routing_gain"] is not None else "no reference energy"}


DEPLOYED = "deployed"  # the deployed point's name among the routers of a report


def deployed_decisions(deployment: dict, scores) -> RoutingDecisions:
    """The deployed point's test decisions: the champion's ``scores`` decided at the deployed λ, or every query
    sent to the single model deployed when routing does not pay on selection data (no router runs: no cost)."""
    chosen = scores.decide(deployment["lam"])
    if deployment.get("policy") != "single":
        return chosen
    return RoutingDecisions(list(chosen.query_ids), [deployment["single"]] * len(chosen.query_ids))


def deployed_block(m: ProfileMatrix, outcome, deployment: dict, with_overhead: bool, margin: float, samples: int,
                   confidence: float, seed: int) -> dict:
    """report.json's ``deployed``: the choices made on selection data, and the deployed policy's test ``outcome``
    (the champion's decisions at the deployed λ, every query to the single model, or the cascade's calls: an
    ``outcomes.Outcome`` or ``CascadeOutcome``) scored on test against the best and the reference single."""
    singles = deployment["singles"]
    column = lambda name: m.candidates.index(singles[name]["candidate"])  # noqa: E731
    best, ref = column("best_single"), column("reference_single")
    def scored(overhead: bool) -> dict:
        return score_deployed(outcome.correct, outcome.energy(overhead), (m.correct[:, best], m.energy_j[:, best]),
                              (m.correct[:, ref], m.energy_j[:, ref]), margin, samples, confidence, seed)

    test = scored(with_overhead) | {"overhead_metered": outcome.overhead_source != "none",
                                    "view": "with_overhead" if with_overhead else "models_only"}
    if deployment.get("policy") == "single":  # no router runs: nothing of its own to meter
        test |= {"routing": f"routing not deployed: {deployment['single']} serves every "
                                                      "query (no route or cascade paid on selection data)"}
    elif deployment.get("policy") == "cascade":
        test |= {"routing": f"the cascade {deployment['deployed']['name']} serves every query"}
    if with_overhead:  # the models' energy alone too: what the router's choices save, before its own cost
        keep = ("j_per_query", "energy_share_of_best", "energy_share_of_best_ci", "routing_gain", "routing_gain_ci",
                "routing")
        test["models_only"] = {k: v for k, v in scored(False).items() if k in keep}
    return {**{k: v for k, v in deployment.items() if k != "sweep"}, "selection_sweep": deployment["sweep"],
            "test": test}
