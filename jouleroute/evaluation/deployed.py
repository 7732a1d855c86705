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
from jouleroute.routing.scores import RoutingDecisions
from jouleroute.routing.target import RouterTarget, choose_lambda
from jouleroute.stats import percentile_interval, resample_index

logger = logging.getLogger(__name__)

SELECTION_SPLITS = ("train", "val")
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


def pick_singles(correct: np.ndarray, energy: np.ndarray, tolerance: float) -> tuple[int, int]:
    """(best, reference) column indices from [queries, candidates] outcomes: the most accurate (ties to the
    cheaper, then the first), and the cheapest within ``tolerance`` of it (ties to the more accurate)."""
    acc, joules = correct.mean(axis=0), energy.mean(axis=0)
    order = range(len(acc))
    best = min(order, key=lambda c: (-round(float(acc[c]), 12), float(joules[c]), c))
    near = [c for c in order if acc[c] >= acc[best] - tolerance - _EPS]
    return best, min(near, key=lambda c: (float(joules[c]), -float(acc[c]), c))


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


def choose_deployed(target: RouterTarget, lams: Sequence[float], correct: np.ndarray, energy: np.ndarray,
                    best_correct: np.ndarray, best_energy: np.ndarray, tolerance: float, samples: int = 0,
                    seed: int = 0) -> dict:
    """The λ of ``lams`` that meets ``target`` on the selection sweep (``correct``/``energy``: [queries, λ] of the
    champion's choices; ``best_*``: the best single's outcomes on the same queries). When none does, the closest
    λ is deployed and ``met_on_selection`` is false. With ``samples``, the share of resamples choosing the same λ."""
    def choose(rows) -> dict:
        return choose_lambda(target, list(lams), list(correct[rows].mean(axis=0)), list(energy[rows].mean(axis=0)),
                             float(best_correct[rows].mean()), float(best_energy[rows].mean()), tolerance)

    everything = np.arange(correct.shape[0])
    choice = choose(everything)
    lam = choice["lam"] if choice["met_on_val"] else choice["closest"]["lam"]
    out = {"target": target.kind, "floor_or_share": choice["value"], "lam": float(lam),
           "met_on_selection": bool(choice["met_on_val"]), "reason": choice.get("reason")}
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
    energy), with paired-bootstrap intervals over the test queries, and the verdicts they support."""
    columns = np.stack([correct, energy, best[0], best[1], reference[0], reference[1]], axis=1).astype(float)
    means = columns.mean(axis=0, keepdims=True)
    if samples > 0:
        means = np.vstack([means, columns[resample_index(len(correct), samples, seed)].mean(axis=1)])
    acc, joules, best_acc, best_j, ref_acc, ref_j = means.T
    with np.errstate(divide="ignore", invalid="ignore"):
        figures = {"accuracy_diff_vs_best": acc - best_acc, "energy_share_of_best": joules / best_j,
                   "accuracy_diff_vs_reference": acc - ref_acc, "routing_gain": joules / ref_j}
    out = {"accuracy": float(acc[0]), "j_per_query": float(joules[0]), "best_accuracy": float(best_acc[0]),
           "best_j_per_query": float(best_j[0]), "reference_accuracy": float(ref_acc[0]),
           "reference_j_per_query": float(ref_j[0]), "n_queries": len(correct), "samples": samples,
           "confidence": confidence, "noninferiority_margin": margin}
    for name, values in figures.items():
        out[name] = float(values[0]) if np.isfinite(values[0]) else None
        finite = values[1:][np.isfinite(values[1:])]
        out[f"{name}_ci"] = percentile_interval(finite, confidence) if finite.size else None
    out |= _verdicts(out, margin)
    return out


def _verdicts(out: dict, margin: float) -> dict:
    """Non-inferiority at ``margin`` (the accuracy difference's CI), the shortfall of the point estimate, and
    whether routing pays against the reference single (the routing gain's CI against 1)."""
    diff, ci = out["accuracy_diff_vs_best"], out["accuracy_diff_vs_best_ci"]
    if ci is None:
        verdict = "untested"  # no bootstrap: no interval to test
    elif ci[0] > -margin:
        verdict = "non-inferior"
    elif ci[1] < -margin:
        verdict = "inferior"
    else:
        verdict = "inconclusive"
    gain, gain_ci = out["routing_gain"], out["routing_gain_ci"]
    if gain_ci is None:
        routing = "not tested (no bootstrap)"
    elif gain_ci[1] < 1:
        routing = "routing saves energy over the reference single"
    elif gain_ci[0] > 1:
        routing = "routing costs more than the reference single"
    else:
        routing = "tie with the reference single"
    return {"noninferiority": verdict, "within_margin": diff >= -margin - _EPS,
            "shortfall": max(0.0, -margin - diff), "routing": routing if gain is not None else "no reference energy"}


DEPLOYED = "deployed"  # the deployed point's name among the routers of a report


def deployed_decisions(deployment: dict, scores) -> RoutingDecisions:
    """The deployed point's test decisions: the champion's ``scores`` decided at the deployed λ, or every query
    sent to the single model deployed when routing does not pay on selection data (no router runs: no cost)."""
    chosen = scores.decide(deployment["lam"])
    if deployment.get("policy") != "single":
        return chosen
    return RoutingDecisions(list(chosen.query_ids), [deployment["single"]] * len(chosen.query_ids))


def deployed_block(m: ProfileMatrix, run, deployment: dict, with_overhead: bool, margin: float, samples: int,
                   confidence: float, seed: int) -> dict:
    """report.json's ``deployed``: the choices made on selection data, and the deployed point (``run``, the
    champion's test decisions at the deployed λ) scored on test against the best and the reference single."""
    from jouleroute.evaluation.outcomes import router_outcome

    outcome = router_outcome(m, run)
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
                                                      "query (routing did not pay on selection data)"}
    if with_overhead:  # the models' energy alone too: what the router's choices save, before its own cost
        keep = ("j_per_query", "energy_share_of_best", "energy_share_of_best_ci", "routing_gain", "routing_gain_ci",
                "routing")
        test["models_only"] = {k: v for k, v in scored(False).items() if k in keep}
    return {**{k: v for k, v in deployment.items() if k != "sweep"}, "selection_sweep": deployment["sweep"],
            "test": test}
