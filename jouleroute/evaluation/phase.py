"""Lambda sweeps and where they change regime.

As the energy penalty lambda grows, a router drifts from expensive, accurate
candidates to cheap ones. The drift is often abrupt; ``detect_transition``
locates it (lambda*, the steepest change against log10 lambda) and measures how
sharp it is (the log10-lambda span from 10% to 90% of the total change).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


def expensive_candidates(j_per_query: dict[str, float], rule: str) -> list[str]:
    """Candidates counted as expensive: mean J/query above the pool median, or only the top one."""
    if rule == "top":
        return [max(j_per_query, key=lambda c: (j_per_query[c], c))]
    if rule == "above_median":
        median = float(np.median(list(j_per_query.values())))
        return sorted(c for c, e in j_per_query.items() if e > median)
    raise ValueError(f"unknown expensive_rule '{rule}' (valid: above_median, top)")


@dataclass(frozen=True)
class Transition:
    """Where a curve y(log10 lambda) changes fastest, and over what span."""

    found: bool
    total_change: float  # y(last lambda) - y(first lambda)
    lambda_star: float | None  # geometric midpoint of the steepest interval
    log10_lambda_star: float | None
    max_slope: float | None  # |dy / dlog10 lambda| on that interval
    lambda_half: float | None  # where the curve crosses half its total change (linear interpolation)
    width_log10: float | None  # log10-lambda span from 10% to 90% of the total change
    grid_step_log10: float | None  # sweep spacing around lambda*: widths below it are unresolved
    resolved: bool  # width_log10 > grid_step_log10: the sweep actually samples the transition

    def to_dict(self) -> dict:
        return asdict(self)


NO_TRANSITION = dict(lambda_star=None, log10_lambda_star=None, max_slope=None, lambda_half=None,
                     width_log10=None, grid_step_log10=None, resolved=False)


def _crossing(x: np.ndarray, f: np.ndarray, level: float, start: int = 0) -> float | None:
    """First x (from index ``start``) where the normalized curve f reaches ``level``, interpolated."""
    for i in range(max(start, 1), len(f)):
        if f[i - 1] < level <= f[i]:
            return float(x[i - 1] + (level - f[i - 1]) / (f[i] - f[i - 1]) * (x[i] - x[i - 1]))
    return float(x[0]) if f[0] >= level else None


def detect_transition(lambdas: np.ndarray, y: np.ndarray, min_change: float) -> Transition:
    """Locate the phase transition of ``y`` along a sweep of ``lambdas`` (any order, all > 0).

    No transition is reported when |y_last - y_first| < ``min_change``.
    """
    lambdas, y = np.asarray(lambdas, float), np.asarray(y, float)
    order = np.argsort(lambdas)
    x, y = np.log10(lambdas[order]), y[order]
    if len(x) < 3:
        raise ValueError(f"a transition needs at least 3 sweep points, got {len(x)}")
    total = float(y[-1] - y[0])
    if abs(total) < min_change:
        return Transition(found=False, total_change=total, **NO_TRANSITION)
    slopes = np.abs(np.diff(y) / np.diff(x))
    i = int(np.argmax(slopes))
    x_star = float((x[i] + x[i + 1]) / 2)
    f = (y - y[0]) / total  # 0 at the first lambda, 1 at the last, whatever the direction
    x10 = _crossing(x, f, 0.1)
    x90 = None if x10 is None else _crossing(x, f, 0.9, start=int(np.searchsorted(x, x10)))
    x50 = _crossing(x, f, 0.5)
    width = None if x10 is None or x90 is None else x90 - x10
    step = float(x[i + 1] - x[i])
    return Transition(
        found=True, total_change=total, lambda_star=float(10**x_star), log10_lambda_star=x_star,
        max_slope=float(slopes[i]), lambda_half=None if x50 is None else float(10**x50),
        width_log10=width, grid_step_log10=step, resolved=width is not None and width > step,
    )


def combined_transition(lambdas: np.ndarray, curves: list[np.ndarray], min_change: float) -> Transition:
    """One transition for several curves: each is scaled to run 0 -> 1 over the sweep, then averaged.

    Curves that change less than ``min_change`` are left out; so accuracy and the
    expensive share, which move in the same direction, weigh equally.
    """
    order = np.argsort(lambdas)
    scaled = []
    for curve in curves:
        c = np.asarray(curve, float)[order]
        total = c[-1] - c[0]
        if abs(total) >= min_change:
            scaled.append((c - c[0]) / total)
    if not scaled:
        return Transition(found=False, total_change=0.0, **NO_TRANSITION)
    return detect_transition(np.asarray(lambdas, float)[order], np.mean(scaled, axis=0), min_change=0.0)
