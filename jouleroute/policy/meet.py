"""The one rule that meets a target over a set of operating points.

An operating point is whatever a user could deploy, measured on selection queries: a router family at one λ, a
cascade chain, a contender's deployed point. Each point has an accuracy, an energy share of the best single's
J/query on its queries, and the best single's accuracy on the same queries (one value for points scored on the
same queries, one per point otherwise). For ``above_best`` each point also needs the lower bound of the paired
interval of its accuracy difference with the best single (``compare.accuracy_intervals``).

- ``energy_share: s``: among the points with share ≤ s, the most accurate (relative to its best single), then the
  cheaper;
- ``accuracy_floor``/``iso_accuracy``: among the points at or above the floor, the cheapest, then the more
  accurate;
- ``above_best: margin``: among the points whose lower bound clears ``margin``, the cheapest, then the more
  accurate.

Exact ties after that go to the smallest ``tiebreak`` (the caller's order; the first point by default). When no
point meets the target the closest is returned with ``met: false`` and a reason (the cheapest for an energy share,
the most accurate for a floor, the highest lower bound for ``above_best``): a target is never clipped silently.

``reaches_floor`` is every accuracy floor's one test; ``iso_accuracy_point`` applies the iso-accuracy floor to rows
of operating points at once (a sample and its bootstrap resamples; a contender's val points) for the figure the
reports give, the iso-accuracy energy share: what the cheapest point as accurate as the best single − tolerance
costs, as a share of the best single's J/query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from jouleroute.policy.target import Target, TargetNotMet

_EPS = 1e-12


@dataclass(frozen=True)
class Pick:
    """The point chosen (``index``), whether it meets the target, the floor or share it was held to, and why not."""

    index: int
    met: bool
    bound: float  # the share (energy_share), the accuracy floor, or the margin (above_best)
    reason: str | None = None


def reaches_floor(accuracy, best_accuracy, tolerance: float = 0.0) -> np.ndarray:
    """Whether each accuracy is at least ``best_accuracy − tolerance`` (to 1e-12: figures from different sums differ
    in the last bits)."""
    return np.asarray(accuracy, dtype=float) >= np.asarray(best_accuracy, dtype=float) - tolerance - _EPS


def iso_accuracy_point(accuracy, j_per_query, best_accuracy, best_j_per_query,
                       tolerance: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``accuracy``/``j_per_query`` ([rows, points]) and of the best single's figures ([rows]): the
    cheapest point that ``reaches_floor`` of the best single − ``tolerance`` (its column; −1 when none does), the
    J/query of the iso-accuracy point (the best single's own when no point qualifies or the cheapest that does costs
    more: the best model is always a choice), and that as a share of the best single's (NaN when that is 0)."""
    acc, joules = np.atleast_2d(np.asarray(accuracy, dtype=float)), np.atleast_2d(np.asarray(j_per_query, dtype=float))
    best_j = np.atleast_1d(np.asarray(best_j_per_query, dtype=float))
    masked = np.where(reaches_floor(acc, np.atleast_1d(best_accuracy)[:, None], tolerance), joules, np.inf)
    cheapest = np.min(masked, axis=1)
    column = np.where(np.isfinite(cheapest), np.argmin(masked, axis=1), -1)
    iso_j = np.minimum(cheapest, best_j)
    return column, iso_j, np.where(best_j > 0, iso_j / np.where(best_j > 0, best_j, 1.0), np.nan)


def meet_target(target: Target, accuracy: Sequence[float], share: Sequence[float], best_accuracy,
                tolerance: float = 0.0, lower_bounds: Sequence[float | None] | None = None,
                tiebreak: Sequence[float] | None = None, what: str = "point",
                admissible: Sequence[bool] | None = None) -> Pick:
    """The point of ``accuracy``/``share`` that meets ``target`` (module doc); ``best_accuracy``: a float or one per
    point; ``tolerance``: iso_accuracy's, below the best single's accuracy; ``what`` names a point in reasons;
    ``admissible``: the caller's further condition (a point that fails it never meets the target, e.g. one whose
    accuracy interval against the best single reaches below the non-inferiority margin)."""
    acc = np.asarray(accuracy, dtype=float)
    shares = np.asarray(share, dtype=float)
    if acc.size == 0 or acc.shape != shares.shape:
        raise ValueError("meet_target needs one accuracy and one energy share per point of a non-empty set")
    best = np.broadcast_to(np.asarray(best_accuracy, dtype=float), acc.shape)
    diff = acc - best
    order = np.arange(acc.size, dtype=float) if tiebreak is None else np.asarray(tiebreak, dtype=float)
    lower = None if lower_bounds is None else np.array([np.nan if b is None else b for b in lower_bounds], dtype=float)
    allowed = np.ones(acc.size, bool) if admissible is None else np.asarray(admissible, dtype=bool)

    def first(rows: np.ndarray, *keys: np.ndarray) -> int:  # np.lexsort sorts by the last key first
        return int(rows[np.lexsort(tuple(k[rows] for k in (order, *reversed(keys))))[0]])

    everything = np.arange(acc.size)
    if target.kind == "energy_share":
        ok = np.flatnonzero((shares <= target.value + _EPS) & allowed)
        if ok.size:
            return Pick(first(ok, -diff, shares), True, target.value)
        k = first(everything, shares, -diff)
        return Pick(k, False, target.value, f"no {what} meets energy_share {target.value:g}: the cheapest "
                                            f"needs {shares[k]:.1%} of the best single's energy")
    if target.kind == "above_best":
        if lower is None:
            raise ValueError("an above_best target needs each point's lower bound over the best single")
        ok = np.flatnonzero((np.nan_to_num(lower, nan=-np.inf) > target.value + _EPS) & allowed)
        if ok.size:
            return Pick(first(ok, shares, -diff), True, target.value)
        if np.isfinite(lower).any():
            k = first(everything, -np.nan_to_num(lower, nan=-np.inf), shares)
            return Pick(k, False, target.value, f"no {what} meets above_best {target.value:g}: no interval over "
                                                f"the best single clears it; the best lower bound: {lower[k]:+.4f}")
        k = first(everything, -diff, shares)
        return Pick(k, False, target.value, f"no {what} meets above_best {target.value:g}: none is above the best "
                                            f"single's accuracy by that much")
    floor = best - tolerance if target.kind == "iso_accuracy" else np.full(acc.shape, target.value)
    ok = np.flatnonzero(reaches_floor(acc, floor) & allowed)
    if ok.size:
        k = first(ok, shares, -diff)
        return Pick(k, True, float(floor[k]))
    k = first(everything, -diff, shares)
    return Pick(k, False, float(floor[k]), f"no {what} meets {target.kind} {floor[k]:.4g}: the most accurate "
                                           f"reaches {acc[k]:.4f}")


def choose_lambda(target: Target, lams: Sequence[float], accuracy: Sequence[float], j_per_query: Sequence[float],
                  best_accuracy: float, best_j_per_query: float, tolerance: float = 0.0,
                  lower_bounds: Sequence[float | None] | None = None) -> dict:
    """The λ of a router's grid that meets ``target`` (``meet_target``; exact ties: the larger λ for an energy
    share, the smaller one otherwise), or why none does, with the closest the grid gets."""
    if not (len(lams) == len(accuracy) == len(j_per_query)) or not lams:
        raise ValueError("choose_lambda needs one accuracy and one J/query per λ of a non-empty grid")
    if best_j_per_query <= 0:
        raise ValueError(f"the best single model's J/query must be > 0, got {best_j_per_query}")
    shares = [j / best_j_per_query for j in j_per_query]
    tiebreak = [-lam if target.kind == "energy_share" else lam for lam in lams]
    pick = meet_target(target, accuracy, shares, best_accuracy, tolerance, lower_bounds, tiebreak, what="λ of the grid")
    point = {"lam": float(lams[pick.index]), "val_accuracy": float(accuracy[pick.index]),
             "val_energy_share": float(shares[pick.index])}
    out = {"kind": target.kind, "value": pick.bound, "met_on_val": pick.met,
           "best_single_val_accuracy": float(best_accuracy), "best_single_val_j_per_query": float(best_j_per_query)}
    if pick.met:
        return out | point
    return out | {"lam": None, "val_accuracy": None, "val_energy_share": None,
                  "reason": f"{pick.reason} (at λ={point['lam']:g})", "closest": point}


def resolve_lambda(target: Target, val_sweep: dict) -> float:
    """The λ that meets ``target`` on the champion's selection sweep (report.json's ``target.val_sweep``);
    raises ``TargetNotMet`` with the closest the grid gets."""
    if target.kind == "above_best":
        raise TargetNotMet("router.target above_best is met with paired intervals on the selection outcomes, which a "
                           "saved sweep does not hold: serve the deployed policy (`jouleroute serve` with no target) "
                           "or put the target in params.yaml and rerun `dvc repro evaluate`")
    choice = choose_lambda(target, val_sweep["lam"], val_sweep["accuracy"], val_sweep["j_per_query"],
                           val_sweep["best_single_accuracy"], val_sweep["best_single_j_per_query"],
                           val_sweep.get("tolerance", 0.0))
    if not choice["met_on_val"]:
        raise TargetNotMet(choice["reason"])
    return choice["lam"]
