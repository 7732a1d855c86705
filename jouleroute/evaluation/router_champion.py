"""The router champion at its λ, then what to deploy across kinds (policy/choose.py), on selection data.

Every router contender brings its selection sweep (``ContenderSweep``: its choices' correctness and energy at each
λ of the decision grid, on the queries it was scored on, with the best single's outcomes on the same queries, and
its own per-query cost when the headline counts it). ``choose_policy`` then

1. deploys each contender at the λ of the grid that meets ``router.target`` (``choose_deployed``), counting the
   router's own cost, since a user pays it on every query;
2. takes as **router champion** the contender whose deployed point serves the target best (policy/meet.py over the
   contenders' points; exact ties go to the first listed);
3. hands the champion's point, the other kinds' policies (the cascade's rule out of fold) and every single model
   to ``policy.choose.choose_across_kinds``, the one rule across kinds with selection's uncertainty.

Stability: the share of bootstrap resamples of the selection queries that choose the same router champion
(contenders scored on a subset of the queries, e.g. the LM router on val, keep their figures in every resample).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from jouleroute.evaluation.outcomes import ProfileMatrix
from jouleroute.policy.choose import PolicyOutcomes, choose_across_kinds, singles_as_policies
from jouleroute.policy.meet import meet_target
from jouleroute.policy.route import ContenderSweep, route_policy
from jouleroute.policy.target import Target
from jouleroute.stats import resample_index



def choose_policy(target: Target, lams: Sequence[float], contenders: Sequence[ContenderSweep],
                  m: ProfileMatrix, tolerance: float, samples: int = 200, seed: int = 0,
                  confidence: float = 0.95, margin: float = 0.03,
                  others: Sequence[PolicyOutcomes] = (), interval_samples: int | None = None) -> dict:
    """The policy to deploy (module doc): the router champion and its λ, then the one rule across kinds (the
    champion's point, ``others`` such as the cascade's out-of-fold outcomes, every single model), whether the
    chosen routing or cascade pays over the single model the target picks alone, every contender's point, and how
    stable the router champion is."""
    if not contenders and not others:
        raise ValueError("no contender to deploy")
    points = _points(target, lams, contenders, m, tolerance, None, confidence)
    k = _champion(target, points, tolerance) if contenders else None
    kinds = list(others) + singles_as_policies(m)
    if k is not None:
        kinds.insert(0, route_policy(contenders[k], points[k], lams))
    decision = choose_across_kinds(target, kinds, m, tolerance, margin,  # the intervals: evaluate.bootstrap_samples
                                   samples if interval_samples is None else interval_samples, seed, confidence, samples)
    out = decision | {"champion": None if k is None else contenders[k].name,
                      "family": None if k is None else contenders[k].family, "index": k,
                      "contenders": [{"name": c.name, "family": c.family, "data": c.data,
                                      "n_queries": len(c.query_ids), **p} for c, p in zip(contenders, points)]}
    if samples > 0 and len(contenders) > 1:
        again = [_champion(target, _points(target, lams, contenders, m, tolerance, rows, confidence), tolerance)
                 for rows in resample_index(len(m.query_ids), samples, seed)]
        out["stability"] = {"champion": float(np.mean(np.array(again) == k)), "samples": samples}
    return out


def _points(target: Target, lams, contenders, m: ProfileMatrix, tolerance: float, rows, confidence) -> list[dict]:
    """Each contender's deployed point on every selection query (``rows`` None) or on a resample of ``m``'s rows;
    a contender scored on other queries (the LM router on val) keeps its point."""
    return [c.point(target, lams, tolerance, rows if rows is not None and c.query_ids == m.query_ids else None,
                    confidence) for c in contenders]


def _champion(target: Target, points: list[dict], tolerance: float) -> int:
    """The contender whose deployed point serves the target best: the one rule (policy/meet.py) over the
    contenders' points, each against the best single on its own queries; exact ties go to the first listed."""
    accuracy = [p["accuracy"] for p in points]
    best = [p["accuracy"] - p["accuracy_diff_vs_best"] for p in points]
    bounds = [p.get("accuracy_diff_vs_best_lower") for p in points] if target.kind == "above_best" else None
    return meet_target(target, accuracy, [p["energy_share_of_best"] for p in points], best, tolerance, bounds,
                       what="contender").index
