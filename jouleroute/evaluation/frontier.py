"""Comparative metrics on the (energy per query, accuracy) plane.

AIQ follows RouterBench (Hu et al., 2024): any two operating points can be
mixed at random, so the quality reachable at an average cost ``c`` is the
non-decreasing upper convex hull of the points; AIQ is its mean height over a
fixed cost range. PGR follows RouteLLM's performance gap recovered. Formulas and
tie rules: docs/metrics.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jouleroute.best_single import best_single
from jouleroute.policy.meet import reaches_floor

# Relative tolerance for "beats the oracle": sums of float energies differ in the last bits.
ORACLE_RTOL = 1e-9


class OracleSanityError(RuntimeError):
    """A policy beat the oracle on energy at the oracle's accuracy: the profile or a join is wrong."""


@dataclass(frozen=True)
class Point:
    name: str
    energy: float  # J/query
    accuracy: float


def nondecreasing_hull(costs: np.ndarray, quality: np.ndarray) -> np.ndarray:
    """Vertices (cost, quality) of the best quality reachable by mixing points at average cost <= c.

    Returned sorted by cost, from the cheapest point (its best quality) to the most
    accurate point (its cheapest cost); beyond the last vertex the curve is flat.
    """
    order = np.lexsort((-quality, costs))  # by cost, then best quality first
    staircase: list[tuple[float, float]] = []
    for c, q in zip(costs[order], quality[order]):
        if not staircase or q > staircase[-1][1]:  # a costlier point only counts if it is better
            staircase.append((float(c), float(q)))
    hull: list[tuple[float, float]] = []
    for p in staircase:  # Andrew's monotone chain, upper half
        while len(hull) >= 2:
            (ox, oy), (ax, ay) = hull[-2], hull[-1]
            if (ax - ox) * (p[1] - oy) - (ay - oy) * (p[0] - ox) >= 0:
                hull.pop()  # hull[-1] lies on or below the chord: a mixture does at least as well
            else:
                break
        hull.append(p)
    return np.asarray(hull)


def aiq(costs: np.ndarray, quality: np.ndarray, cost_range: tuple[float, float]) -> float:
    """Mean of the non-decreasing convex hull over ``cost_range`` = (c_min, c_max).

    The range must start at or above the cheapest point (below it nothing is reachable).
    """
    lo, hi = cost_range
    hull = nondecreasing_hull(np.asarray(costs, float), np.asarray(quality, float))
    if lo < hull[0, 0] - ORACLE_RTOL * max(abs(lo), 1.0):
        raise ValueError(f"AIQ range starts at {lo} J/query, below the cheapest point {hull[0, 0]}")
    if hi <= lo:
        return float(np.interp(lo, hull[:, 0], hull[:, 1]))
    xs = np.unique(np.concatenate([[lo, hi], hull[(hull[:, 0] > lo) & (hull[:, 0] < hi), 0]]))
    ys = np.interp(xs, hull[:, 0], hull[:, 1])  # flat after the last vertex
    return float(np.sum((ys[1:] + ys[:-1]) / 2 * np.diff(xs)) / (hi - lo))


def pareto_mask(points: list[Point]) -> list[bool]:
    """True where no other point has energy <= and accuracy >= with at least one strictly better."""
    out = []
    for p in points:
        dominated = any(
            (o.energy <= p.energy and o.accuracy >= p.accuracy) and (o.energy < p.energy or o.accuracy > p.accuracy)
            for o in points
        )
        out.append(not dominated)
    return out


def cheapest_and_best(singles: list[Point]) -> tuple[Point, Point]:
    """The single candidate with the lowest J/query (ties: more accurate) and the most accurate (ties: cheaper)."""
    cheapest = min(singles, key=lambda p: (p.energy, -p.accuracy))
    best = singles[best_single([p.accuracy for p in singles], [p.energy for p in singles])]
    return cheapest, best


def pgr(acc: float, cheapest: Point, best: Point) -> float | None:
    """Performance gap recovered: (acc - acc_cheapest) / (acc_best - acc_cheapest); None if there is no gap."""
    gap = best.accuracy - cheapest.accuracy
    return (acc - cheapest.accuracy) / gap if gap > 0 else None


def savings_captured_pct(acc: float, energy: float, best: Point, oracle: Point, tolerance: float) -> float | None:
    """Share (%) of the oracle's energy saving versus the best single that a router keeps.

    0 when the router loses more than ``tolerance`` accuracy against the best single;
    None when the oracle saves nothing. Can be negative (costs more than the best
    single) or above 100 (cheaper than the oracle by giving up accuracy).
    """
    room = best.energy - oracle.energy
    if room <= 0:
        return None
    if not reaches_floor(acc, best.accuracy, tolerance):
        return 0.0
    return 100.0 * (best.energy - energy) / room


def check_oracle(oracle: Point, others: list[Point]) -> None:
    """Raise if any policy reaches the oracle's accuracy with less energy (models only, no overhead).

    The oracle is correct wherever any candidate is, at the lowest such energy, so
    this can only happen when outcomes were joined to the wrong profile rows.
    """
    limit = oracle.energy * (1 - ORACLE_RTOL) - 1e-12
    for p in others:
        if p.accuracy >= oracle.accuracy - 1e-12 and p.energy < limit:
            raise OracleSanityError(
                f"'{p.name}' reaches accuracy {p.accuracy:.4f} (oracle {oracle.accuracy:.4f}) with "
                f"{p.energy:.6g} J/query, less than the oracle's {oracle.energy:.6g}: the outcomes do not come "
                "from the profile the oracle was built on (duplicated or misjoined rows?)"
            )
