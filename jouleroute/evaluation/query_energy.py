"""Per-query energy on val: how well ê_c(x) predicts joules against the task mean, and where it is adopted.

``routing.baselines.query_energy.QueryEnergyModel`` predicts each candidate's joules per query. Here, on
the val queries and never on test:

- its error against the profile, beside the task mean's (each candidate's train mean on the query's task,
  the estimate the LM router and MF decide with): mean absolute relative error and RMSE of log joules;
- per router family, the mean val utility over the trained λ grid (``val_utility.mean_utility``) with the
  family's own energy estimate and with ê. As for kNN's evidence (knn_evidence.py), the figure that decides
  is cross-fitted: the val queries are split in two folds by a stable hash of the query id, the choice (ê
  or not) is made on one fold and scored on the other, and the two are pooled. A family adopts ê only when
  ê is better on all of val *and* the cross-fitted figure beats its own estimate; that cross-fitted figure
  (per λ) is what the family brings to the champion contest when it adopts ê.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from jouleroute.evaluation.knn_evidence import fold_of
from jouleroute.evaluation.outcomes import ProfileMatrix
from jouleroute.evaluation.val_utility import energy_error, mean_utility, per_query_utility, val_points
from jouleroute.routing.base import Router, Scores
from jouleroute.routing.baselines.query_energy import PerQueryEnergy, QueryEnergyModel

_FLOOR_J = 1e-9


def prediction_errors(predicted: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """Mean absolute relative error and RMSE of log joules, over every (query, candidate)."""
    predicted, truth = np.asarray(predicted, float), np.asarray(truth, float)
    log_error = np.log(np.maximum(predicted, _FLOOR_J)) - np.log(np.maximum(truth, _FLOOR_J))
    return {"relative_error": float(np.mean(np.abs(predicted - truth) / np.maximum(np.abs(truth), _FLOOR_J))),
            "log_rmse": float(np.sqrt(np.mean(log_error ** 2)))}


def task_mean_energy(train: pd.DataFrame, energy_column: str, candidates: Sequence[str],
                     tasks: Sequence[str]) -> np.ndarray:
    """[queries, candidates]: each candidate's train mean joules on each query's task (overall mean if unseen)."""
    by_task = train.groupby(["task", "candidate_id"])[energy_column].mean()
    overall = train.groupby("candidate_id")[energy_column].mean()
    return np.array([[float(by_task.get((t, c), overall[c])) for c in candidates] for t in tasks])


def _scores_without_meter(router: Router, queries: pd.DataFrame):
    meter = getattr(router, "meter", None)
    if meter is not None:
        router.meter = None  # its decisions count here; its own cost is metered on test
    try:
        return router.score(queries)
    finally:
        if meter is not None:
            router.meter = meter


def _rows(scores: Scores, keep: Sequence[bool]) -> Scores:
    idx = [i for i, k in enumerate(keep) if k]
    pick = lambda values: [values[i] for i in idx] if values else []
    return replace(scores, query_ids=[scores.query_ids[i] for i in idx], merit=scores.merit[idx],
                   cost=scores.cost[idx], energy_j=scores.energy_j[idx],
                   overhead_latency_s=pick(scores.overhead_latency_s), overhead_energy_j=pick(scores.overhead_energy_j))


def cross_fitted(own: Scores, alt: Scores, matrix: ProfileMatrix, lambdas: Sequence[float],
                 energy_norm: str) -> dict:
    """Choose ê or not on one fold of val, score the choice on the other; pooled per λ (module docstring)."""
    folds = [fold_of(q) for q in own.query_ids]
    pooled = {float(lam): [0.0, 0] for lam in lambdas}
    points = {float(lam): [0.0, 0.0] for lam in lambdas}  # Σ n·accuracy, Σ n·J of the held-out choices
    per_query: dict[str, float] = {}  # each val query's utility under the choice made on the other fold
    choices = []
    for fold in (0, 1):
        tune, held = [f != fold for f in folds], [f == fold for f in folds]
        if not any(tune) or not any(held):
            continue
        use = mean_utility(_rows(alt, tune), matrix, lambdas, energy_norm) > \
            mean_utility(_rows(own, tune), matrix, lambdas, energy_norm) + 1e-12
        choices.append("per_query" if use else "own")
        chosen, n = _rows(alt if use else own, held), sum(held)
        held_points = val_points(chosen, matrix, lambdas)
        per_query.update(per_query_utility(chosen, matrix, lambdas, energy_norm))
        for lam in lambdas:
            total, point = pooled[float(lam)], points[float(lam)]
            total[0], total[1] = total[0] + n * mean_utility(chosen, matrix, [lam], energy_norm), total[1] + n
            accuracy, joules = held_points[float(lam)]
            point[0], point[1] = point[0] + n * accuracy, point[1] + n * joules
    by_lambda = {lam: s / n for lam, (s, n) in pooled.items() if n}
    return {"by_lambda": by_lambda, "fold_choices": choices, "per_query_utility": per_query,
            "points": {lam: [a / pooled[lam][1], j / pooled[lam][1]] for lam, (a, j) in points.items() if pooled[lam][1]},
            "val_utility": float(np.mean(list(by_lambda.values()))) if by_lambda else None}


def adopt_on_val(routers: Mapping[str, Router], model: QueryEnergyModel, val_queries: pd.DataFrame,
                 val_matrix: ProfileMatrix, train: pd.DataFrame, energy_column: str, lambdas: Sequence[float],
                 energy_norm: str) -> tuple[dict[str, Router], dict]:
    """``routers`` with ê wherever it raises the family's mean val utility, and the evidence for each choice."""
    rows = [val_matrix.query_ids.index(q) for q in val_queries["query_id"]]
    cols = [val_matrix.candidates.index(c) for c in model.candidates]
    truth = val_matrix.energy_j[np.ix_(rows, cols)]
    predicted = model.predict(val_queries)
    task_mean = task_mean_energy(train, energy_column, model.candidates, val_queries["task"].astype(str).tolist())
    report = {"n_val_queries": len(rows), "alpha": dict(zip(model.candidates, model.alpha)),
              "energy_error_val": {"per_query": prediction_errors(predicted, truth),
                                   "task_mean": prediction_errors(task_mean, truth)},
              "families": {}}
    by_candidate = pd.DataFrame(predicted, columns=model.candidates)
    out = dict(routers)
    for family, router in routers.items():
        own = _scores_without_meter(router, val_queries)
        alt = own.with_energy(by_candidate[own.candidates].to_numpy(), energy_norm)
        u_own, u_alt = (mean_utility(s, val_matrix, lambdas, energy_norm) for s in (own, alt))
        cross = cross_fitted(own, alt, val_matrix, lambdas, energy_norm)
        # ties keep the family's own estimate; a choice that only pays on the rows it was made on is not adopted
        adopted = u_alt > u_own + 1e-12 and cross["val_utility"] is not None and cross["val_utility"] > u_own + 1e-12
        report["families"][family] = {"val_utility_own": u_own, "val_utility_per_query": u_alt,
                                      "cross_fitted": cross, "energy_error_val_own": energy_error(own, val_matrix),
                                      "adopted": adopted}
        if adopted:
            out[family] = PerQueryEnergy(router, model, energy_norm)
    return out, report
