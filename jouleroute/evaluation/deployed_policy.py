"""What to deploy, decided on selection data: the champion router at its λ, or one single model.

Every contender brings its selection sweep (``ContenderSweep``: its choices' correctness and energy at each λ of
the decision grid, on the queries it was scored on, with the best single's outcomes on the same queries, and its
own per-query cost when the headline counts it). ``choose_policy`` then

1. deploys each contender at the λ of the grid that meets ``router.target`` (``choose_deployed``), counting the
   router's own cost, since a user pays it on every query;
2. takes as **champion** the contender whose deployed point serves the target best: among those that meet it,
   the cheapest (as a share of the best single's energy on the same queries) for an accuracy target, the most
   accurate for an energy-share target; when none meets it, the closest; exact ties go to the first listed;
3. compares the champion's point with the single model the same target picks alone on the selection data (for
   the default ``iso_accuracy``: the reference single, the cheapest within the tolerance of the best): routing is
   deployed only when it **pays**, i.e. the champion meets the target and a paired-bootstrap interval over its
   selection queries says it beats that single model (its J/query, own cost included, below the single's for an
   accuracy target; its accuracy above the single's for an energy share). Otherwise that single model is
   deployed, every query sent to it: a saving within noise does not justify running a router, and on test it
   would as likely be a loss.

Stability: the share of bootstrap resamples of the selection queries that choose the same champion (contenders
scored on a subset of the queries, e.g. the LM router on val, keep their figures in every resample).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from jouleroute.evaluation.deployed import choose_deployed
from jouleroute.evaluation.outcomes import ProfileMatrix
from jouleroute.policy.compare import compare
from jouleroute.policy.meet import meet_target
from jouleroute.policy.singles import best_column, single_for_target
from jouleroute.policy.target import Target
from jouleroute.stats import resample_index

_EPS = 1e-12
ROUTE, SINGLE = "route", "single"


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

    def point(self, target: Target, lams: Sequence[float], tolerance: float, rows=None) -> dict:
        """Its deployed λ on ``rows`` (default: every query) and that point's figures."""
        rows = np.arange(len(self.query_ids)) if rows is None else rows
        energy = self.energy[rows] + self.overhead_j
        choice = choose_deployed(target, lams, self.correct[rows], energy, self.best_correct[rows],
                                 self.best_energy[rows], tolerance)
        k = list(lams).index(choice["lam"])
        best_acc, best_j = float(self.best_correct[rows].mean()), float(self.best_energy[rows].mean())
        acc, joules = float(self.correct[rows, k].mean()), float(energy[:, k].mean())
        return choice | {"accuracy": acc, "j_per_query": joules, "overhead_j": self.overhead_j,
                         "accuracy_diff_vs_best": acc - best_acc, "energy_share_of_best": joules / best_j}


def choose_policy(target: Target, lams: Sequence[float], contenders: Sequence[ContenderSweep],
                  m: ProfileMatrix, tolerance: float, samples: int = 200, seed: int = 0,
                  confidence: float = 0.95) -> dict:
    """The policy to deploy (module doc): the champion, its λ, whether routing pays over the single model the
    target picks alone on ``m`` (the selection matrix), every contender's point, and how stable the champion is.
    Routing pays only when the champion meets the target and its paired-bootstrap interval over its selection
    queries (``samples`` resamples) says it beats that single model: its J/query ratio to the single's below 1
    for an accuracy target, its accuracy difference above 0 for an energy share."""
    if not contenders:
        raise ValueError("no contender to deploy")
    points = _points(target, lams, contenders, m, tolerance, None)
    k = _champion(target, points, tolerance)
    champion, point = contenders[k], points[k]
    single = _best_single(target, m, tolerance, None)
    evidence = None if single is None else _against_single(target, champion, point, m, single, lams, samples, seed,
                                                           confidence)
    pays = point["met_on_selection"] and (single is None or evidence["pays"])
    out = {"champion": champion.name, "family": champion.family, "index": k,
           "policy": ROUTE if pays or single is None else SINGLE,
           "single": None if single is None else single["candidate"], "single_on_selection": single,
           "routing_on_selection": evidence,
           "contenders": [{"name": c.name, "family": c.family, "data": c.data, "n_queries": len(c.query_ids),
                           **p} for c, p in zip(contenders, points)]}
    if samples > 0 and len(contenders) > 1:
        again = [_champion(target, _points(target, lams, contenders, m, tolerance, rows), tolerance)
                 for rows in resample_index(len(m.query_ids), samples, seed)]
        out["stability"] = {"champion": float(np.mean(np.array(again) == k)), "samples": samples}
    return out


def _points(target: Target, lams, contenders, m: ProfileMatrix, tolerance: float, rows) -> list[dict]:
    """Each contender's deployed point on every selection query (``rows`` None) or on a resample of ``m``'s rows;
    a contender scored on other queries (the LM router on val) keeps its point."""
    return [c.point(target, lams, tolerance, rows if rows is not None and c.query_ids == m.query_ids else None)
            for c in contenders]


def _champion(target: Target, points: list[dict], tolerance: float) -> int:
    """The contender whose deployed point serves the target best: the one rule (policy/meet.py) over the
    contenders' points, each against the best single on its own queries; exact ties go to the first listed."""
    accuracy = [p["accuracy"] for p in points]
    best = [p["accuracy"] - p["accuracy_diff_vs_best"] for p in points]
    bounds = [p.get("accuracy_diff_vs_best_lower") for p in points] if target.kind == "above_best" else None
    return meet_target(target, accuracy, [p["energy_share_of_best"] for p in points], best, tolerance, bounds,
                       what="contender").index


def _against_single(target: Target, c: ContenderSweep, point: dict, m: ProfileMatrix, single: dict,
                    lams, samples: int, seed: int, confidence: float) -> dict:
    """The champion's point against the single model on the champion's selection queries, paired: the J/query
    ratio (router over single, its own cost included) and the accuracy difference, with bootstrap intervals."""
    rows = np.array([m.query_ids.index(q) for q in c.query_ids]) if c.query_ids != m.query_ids else \
        np.arange(len(m.query_ids))
    s = m.candidates.index(single["candidate"])
    k = list(lams).index(point["lam"])
    vs = compare(c.correct[:, k], c.energy[:, k] + c.overhead_j, m.correct[rows, s], m.energy_j[rows, s], 0.0,
                 samples, confidence, seed)
    if samples <= 0:
        pays = vs["energy_ratio"] < 1 - _EPS if target.kind != "energy_share" else vs["accuracy_diff"] > _EPS
    else:
        pays = vs["energy_verdict"] == "cheaper" if target.kind != "energy_share" else vs["verdict"] == "above"
    return {"single": single["candidate"], "j_ratio": vs["energy_ratio"], "j_ratio_ci": vs["energy_ratio_ci"],
            "accuracy_diff": vs["accuracy_diff"], "accuracy_diff_ci": vs["accuracy_diff_ci"], "n_queries": len(rows),
            "pays": bool(pays), "samples": samples, "confidence": confidence}


def _best_single(target: Target, m: ProfileMatrix, tolerance: float, rows) -> dict | None:
    """The single model the target would deploy without a router, on ``m``'s rows (policy/singles.py), with its
    figures; ``None`` when no single model meets the target."""
    correct, energy = (m.correct, m.energy_j) if rows is None else (m.correct[rows], m.energy_j[rows])
    pick = single_for_target(target, correct, energy, tolerance)
    if pick is None:
        return None
    best = best_column(correct, energy)
    acc, joules = correct.mean(axis=0), energy.mean(axis=0)
    return {"candidate": m.candidates[pick], "accuracy": float(acc[pick]), "j_per_query": float(joules[pick]),
            "accuracy_diff_vs_best": float(acc[pick] - acc[best]), "energy_share_of_best": float(joules[pick] /
                                                                                               joules[best])}
