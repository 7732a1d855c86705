"""Choices made on val, never on test: a router's mean utility over the λ grid, and the blend it picks.

The utility of routing query q to candidate c at weight λ is the one training uses,

    u(q, c; λ) = correct(q, c) − λ · normalize_energy(energy(q, ·))[c]

with the query's measured (or modelled) energies from the profile. A router's val utility is
the mean of u over val queries and over the λ grid: one number that rewards being right at
every energy weight a user may deploy.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from jouleroute.evaluation.outcomes import ProfileMatrix
from jouleroute.routing.blend import EnergyFrom, blend_scores
from jouleroute.routing.scores import Scores, normalize_energy, utility
from jouleroute.routing.utility import query_means


def _aligned(scores: Scores, matrix: ProfileMatrix) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``matrix`` for the queries of ``scores``, and its columns for their candidates."""
    row = {q: i for i, q in enumerate(matrix.query_ids)}
    missing = [q for q in scores.query_ids if q not in row]
    if missing:
        raise ValueError(f"{len(missing)} scored queries are not in the profile split (first: {missing[:3]})")
    outside = sorted(set(scores.candidates) - set(matrix.candidates))
    if outside:
        raise ValueError(f"scored candidates {outside} are not in the profile ({matrix.candidates})")
    return (np.array([row[q] for q in scores.query_ids]),
            np.array([matrix.candidates.index(c) for c in scores.candidates]))


def per_query_utility(scores: Scores, matrix: ProfileMatrix, lambdas: Sequence[float],
                      energy_norm: str) -> dict[str, float]:
    """Query -> its mean over ``lambdas`` of u(q, choice(q; λ); λ): the paired bootstrap's unit. The same rule
    (``scores.utility``) and average (``utility.query_means``) as a router's utility on router_data rows."""
    rows, cols = _aligned(scores, matrix)
    correct = matrix.correct[np.ix_(rows, cols)].astype(float)
    cost = normalize_energy(matrix.energy_j[np.ix_(rows, cols)], energy_norm)
    picked = np.arange(len(rows))

    def at(lam: float) -> list[float]:
        chosen = scores.choices(lam)
        return [float(u) for u in utility(correct[picked, chosen], cost[picked, chosen], lam)]

    return query_means((scores.query_ids, at(lam)) for lam in lambdas)


def mean_utility(scores: Scores, matrix: ProfileMatrix, lambdas: Sequence[float], energy_norm: str) -> float:
    """Mean over ``lambdas`` and queries of u(q, choice(q; λ); λ)."""
    by_query = per_query_utility(scores, matrix, lambdas, energy_norm)
    return float(np.mean([by_query[str(q)] for q in scores.query_ids]))


def val_points(scores: Scores, matrix: ProfileMatrix, lambdas: Sequence[float]) -> dict[float, tuple[float, float]]:
    """λ -> (accuracy, mean J/query) of the router's choices on the queries of ``scores``."""
    rows, cols = _aligned(scores, matrix)
    correct = matrix.correct[np.ix_(rows, cols)].astype(float)
    energy = matrix.energy_j[np.ix_(rows, cols)].astype(float)
    picked = np.arange(len(rows))
    return {float(lam): (float(np.mean(correct[picked, scores.choices(lam)])),
                         float(np.mean(energy[picked, scores.choices(lam)]))) for lam in lambdas}


def choose_blend(first: Scores, second: Scores, matrix: ProfileMatrix, lambdas: Sequence[float], energy_norm: str,
                 grid: Sequence[tuple[float, EnergyFrom]]) -> tuple[tuple[float, EnergyFrom], dict[str, float]]:
    """The (weight, energy) of ``grid`` with the best val utility; ties keep the earlier entry (the plainer blend)."""
    table = {f"{w:g}/{e}": mean_utility(blend_scores(first, second, w, e), matrix, lambdas, energy_norm)
             for w, e in grid}
    best = max(range(len(grid)), key=lambda i: (round(table[f"{grid[i][0]:g}/{grid[i][1]}"], 12), -i))
    return grid[best], table


def energy_error(scores: Scores, matrix: ProfileMatrix) -> float:
    """Mean absolute relative error of a router's energy estimates (``scores.energy_j``) against the profile."""
    rows, cols = _aligned(scores, matrix)
    truth = matrix.energy_j[np.ix_(rows, cols)]
    predicted = np.asarray(scores.energy_j, dtype=float)
    return float(np.mean(np.abs(predicted - truth) / np.maximum(np.abs(truth), 1e-9)))


def blend_on_val(first_val: Scores, second_val: Scores, val_matrix: ProfileMatrix, lambdas: Sequence[float],
                 energy_norm: str, weights: Sequence[float]) -> dict:
    """Choose the blend of ``first`` (the LM router) with ``second`` (kNN) on val, and say why.

    Returns the chosen ``weight`` and ``energy`` (whose estimate decides the cost), the val utility
    of every pair tried, and the val error of the two energy estimates (the first's: the task-mean
    energy the LM router was trained with; the second's: the per-query neighbour energy).
    """
    from jouleroute.routing.blend import blend_grid

    (weight, energy), table = choose_blend(first_val, second_val, val_matrix, lambdas, energy_norm,
                                           blend_grid(list(weights)))
    return {"weight": weight, "energy": energy, "val_utility": table,
            "val_utility_unblended": table[f"{0:g}/first"], "val_utility_chosen": table[f"{weight:g}/{energy}"],
            "energy_error_val": {"first": energy_error(first_val, val_matrix),
                                 "second": energy_error(second_val, val_matrix)}}
