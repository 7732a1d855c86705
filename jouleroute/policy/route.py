"""A router family at an operating point, as a policy: its λ chosen on selection data, then scored once on test.

- ``choose_deployed``: the λ of the grid that meets the target on the selection sweep (policy/meet.py), and the
  share of bootstrap resamples of the selection queries that choose the same λ;
- ``ContenderSweep``: a router family's selection sweep (its choices' outcomes at every λ of the grid);
  ``route_policy`` makes its deployed point a policy for the one rule across kinds (policy/choose.py);
- ``score_deployed``: the deployed point on test against the best and the reference single, two paired
  comparisons (policy/compare.py) on one set of resamples, and the verdicts they support.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from jouleroute.policy.choose import ROUTE, PolicyOutcomes
from jouleroute.policy.compare import accuracy_intervals, compare, energy_verdict, lower_ends
from jouleroute.policy.meet import choose_lambda
from jouleroute.policy.target import Target
from jouleroute.stats import percentile_interval, resample_index

_EPS = 1e-12
ABOVE_BEST_SAMPLES = 200  # resamples of each λ's interval when router.target is above_best


def choose_deployed(target: Target, lams: Sequence[float], correct: np.ndarray, energy: np.ndarray,
                    best_correct: np.ndarray, best_energy: np.ndarray, tolerance: float, samples: int = 0,
                    seed: int = 0, confidence: float = 0.95) -> dict:
    """The λ of ``lams`` that meets ``target`` on the selection sweep (``correct``/``energy``: [queries, λ] of the
    champion's choices; ``best_*``: the best single's outcomes on the same queries). When none does, the closest
    λ is deployed and ``met_on_selection`` is false. With ``samples``, the share of resamples choosing the same λ.
    An ``above_best`` target reads each λ's paired interval at ``confidence`` (``evaluate.confidence``)."""
    def choose(rows) -> dict:
        bounds = (lower_ends(accuracy_intervals(correct[rows], best_correct[rows], ABOVE_BEST_SAMPLES, confidence,
                                                seed))
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


@dataclass(frozen=True)
class ContenderSweep:
    """A contender's selection sweep: [queries, λ] correctness and models' energy of its choices on
    ``query_ids`` (the best single's outcomes on the same queries beside them) and its own J/query."""

    name: str
    family: str
    data: str  # how it was scored, e.g. "train+val, cross-fitted over 5 folds" or "val"
    query_ids: list[str]
    correct: np.ndarray
    energy: np.ndarray
    best_correct: np.ndarray
    best_energy: np.ndarray
    overhead_j: float = 0.0  # its own mean J/query on selection queries (0 when the headline leaves it out)

    def point(self, target: Target, lams: Sequence[float], tolerance: float, rows=None,
              confidence: float = 0.95) -> dict:
        """Its deployed λ on ``rows`` (default: every query) and that point's figures."""
        rows = np.arange(len(self.query_ids)) if rows is None else rows
        energy = self.energy[rows] + self.overhead_j
        choice = choose_deployed(target, lams, self.correct[rows], energy, self.best_correct[rows],
                                 self.best_energy[rows], tolerance, confidence=confidence)
        k = list(lams).index(choice["lam"])
        best_acc, best_j = float(self.best_correct[rows].mean()), float(self.best_energy[rows].mean())
        acc, joules = float(self.correct[rows, k].mean()), float(energy[:, k].mean())
        return choice | {"accuracy": acc, "j_per_query": joules, "overhead_j": self.overhead_j,
                         "accuracy_diff_vs_best": acc - best_acc, "energy_share_of_best": joules / best_j}


def route_policy(c: ContenderSweep, point: dict, lams: Sequence[float]) -> PolicyOutcomes:
    """The contender at its deployed point as a ``route`` policy, its own cost counted on every query."""
    k = list(lams).index(point["lam"])
    return PolicyOutcomes(ROUTE, c.name, c.data, list(c.query_ids), c.correct[:, k], c.energy[:, k] + c.overhead_j,
                          c.best_correct, c.best_energy, {"family": c.family, "lam": point["lam"]})
