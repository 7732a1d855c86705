"""The LM router with kNN's neighbour evidence: how much of it to use is chosen on val, never on test.

The LM router reads the query; kNN reads the outcomes of its nearest train neighbours. Both are
scored once per query (``Scores``) and mixed by ``routing.blend.blend_scores``: weight ``w`` on kNN's
merit, and whose energy estimate decides the cost (the LM's task means, or kNN's per-query neighbour
energy). ``w = 0`` with the LM's energy is the LM router alone.

The choice uses the same figure as the champion selection (``selection.py``): the mean over the
trained λ grid of the val utility ``correct − λ·normalized energy`` on router_data's val rows. The
figure that decides is *cross-fitted*: the val queries are split in two folds (by a stable hash of the
query id), the blend is chosen on one fold and scored on the other, and the two scores are pooled. A
blend is deployed only when that figure beats the LM router alone (a blend chosen and scored on the
same rows would be favoured by the choice itself), and it is the figure the blend brings to the
champion contest, where the LM checkpoints and the baselines enter with figures they were not tuned on.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Mapping, Sequence

from jouleroute.evaluation.label_eval import label_accuracy
from jouleroute.evaluation.val_contest import Decided
from jouleroute.routing.blend import EnergyFrom, blend_grid, blend_scores
from jouleroute.routing.scores import Scores

logger = logging.getLogger(__name__)


def fold_of(query_id: str) -> int:
    """0 or 1, stable across runs and machines (not Python's salted ``hash``)."""
    return hashlib.sha256(str(query_id).encode()).digest()[0] % 2


def _by_lambda(scores: Scores, rows: Sequence[Mapping], energy_norm: str,
               per_query: dict | None = None) -> dict[str, tuple[float, int, float, float]]:
    """λ -> (mean val utility of ``scores``' choices, rows, their accuracy, their mean J/query) on ``rows``;
    each query's mean utility over the grid goes into ``per_query`` when given."""
    check = label_accuracy(Decided(scores), rows, energy_norm=energy_norm)
    if per_query is not None:
        per_query.update(check.get("per_query_utility") or {})
    return {lam: (float(s["router_utility"]), int(s["n"]), float(s["chosen_accuracy"]),
                  float(s["chosen_mean_energy_j"])) for lam, s in check["by_lambda"].items()}


def _mean(by_lambda: Mapping[str, tuple]) -> float:
    return sum(row[0] for row in by_lambda.values()) / len(by_lambda)


def _best(lm: Scores, knn: Scores, rows: Sequence[Mapping], energy_norm: str,
          grid: Sequence[tuple[float, EnergyFrom]]) -> tuple[int, dict[str, float]]:
    """Index into ``grid`` of the best mean val utility on ``rows`` (ties: the earlier, plainer blend)."""
    table = {_key(w, e): _mean(_by_lambda(blend_scores(lm, knn, w, e), rows, energy_norm)) for w, e in grid}
    best = max(range(len(grid)), key=lambda i: (round(table[_key(*grid[i])], 12), -i))
    return best, table


def _key(weight: float, energy: EnergyFrom) -> str:
    return f"{weight:g}/{energy}"


def choose_knn_evidence(lm_val: Scores, knn_val: Scores, val_rows: Sequence[Mapping], energy_norm: str,
                        weights: Sequence[float]) -> dict:
    """The (weight, energy) to deploy, and the cross-fitted val figures that decide whether to deploy one.

    The best pair on all val rows (``best_in_sample``) is adopted only when the choice procedure, run on
    one half of val and scored on the other (``cross_fitted``), beats the LM router alone; otherwise
    ``plain`` is true and the LM router is used alone. Also returned: ``val_utility`` (every pair tried,
    on all val rows) and ``cross_fitted`` = {``by_lambda``: λ -> utility, ``points``: λ -> [accuracy, J/query] of the held-out
    choices, ``val_utility``, ``fold_choices``}.
    """
    grid = blend_grid(sorted(set(float(w) for w in weights) | {0.0}))
    best, table = _best(lm_val, knn_val, val_rows, energy_norm, grid)
    weight, energy = grid[best]
    pooled: dict[str, list[float]] = {}
    per_query: dict[str, float] = {}  # each val query's utility under the blend chosen on the other fold
    fold_choices = []
    for fold in (0, 1):
        tune = [r for r in val_rows if fold_of(r["query_id"]) != fold]
        held = [r for r in val_rows if fold_of(r["query_id"]) == fold]
        if not tune or not held:
            continue
        index, _ = _best(lm_val, knn_val, tune, energy_norm, grid)
        fold_choices.append(_key(*grid[index]))
        for lam, (utility, n, accuracy, joules) in _by_lambda(blend_scores(lm_val, knn_val, *grid[index]), held,
                                                              energy_norm, per_query).items():
            total = pooled.setdefault(lam, [0.0, 0, 0.0, 0.0])
            total[0], total[1] = total[0] + utility * n, total[1] + n
            total[2], total[3] = total[2] + accuracy * n, total[3] + joules * n
    by_lambda = {lam: s / n for lam, (s, n, _, _) in pooled.items()}
    points = {lam: [a / n, j / n] for lam, (_, n, a, j) in pooled.items()}  # (accuracy, J/query) of held choices
    cross = sum(by_lambda.values()) / len(by_lambda) if by_lambda else None
    alone = table[_key(0.0, "first")]
    best_in_sample = _key(weight, energy)
    # The choice is adopted only when choosing pays on rows it was not made on: the cross-fitted figure of
    # the procedure beats the LM alone. On a small val split the in-sample best is mostly noise.
    adopted = best_in_sample != _key(0.0, "first") and cross is not None and cross > alone + 1e-12
    if not adopted:
        weight, energy = 0.0, "first"
    out = {"weight": weight, "energy": energy, "plain": not adopted, "best_in_sample": best_in_sample,
           "val_utility": table, "val_utility_alone": alone,
           "cross_fitted": {"by_lambda": by_lambda, "points": points, "per_query_utility": per_query,
                            "fold_choices": fold_choices,
                            "val_utility": cross}}
    logger.info("kNN evidence on val: best in-sample %s (val utility %.4f; LM alone %.4f; cross-fitted %s): %s",
                best_in_sample, table[best_in_sample], alone, "n/a" if cross is None else f"{cross:.4f}",
                f"adopted, weight {weight:g}, energy from {energy}" if adopted else "the LM router alone")
    return out
