"""The saving in a user's terms: the energy a router needs to match the best single model's accuracy.

For a policy with operating points P (a λ family's sweep, or one point), the **iso-accuracy point** is the
cheapest point of P whose test accuracy is at least ``acc(best) − tolerance``; the best single model is
itself a point a user can always choose, so when no point of P qualifies (or the cheapest that does costs
more) the answer is the best model itself (``policy.meet.iso_accuracy_point``, the val contest's rule too). Then

    energy_share               = E(iso point) / E(best)                         (≤ 1; 1 means no saving)
    oracle_savings_captured_pct = 100 · (E(best) − E(iso point)) / (E(best) − E(oracle))

``reached`` says whether a point of P qualified at all. Both figures get a paired-bootstrap interval
over the test queries: the resamples of ``stats.resample_counts`` (one draw for every policy), with
the best single model's identity fixed on the full sample and the iso point chosen again on each
resample. Formulas and the sign of the captured share: docs/metrics.md.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from jouleroute.policy.meet import iso_accuracy_point
from jouleroute.stats import percentile_interval, resample_counts


def _means(columns: list[np.ndarray], samples: int, seed: int) -> np.ndarray:
    """[1 + samples, columns]: each column's mean on the full sample (row 0) and on each resample."""
    table = np.stack(columns, axis=1).astype(float)
    n = table.shape[0]
    rows = [table.mean(axis=0, keepdims=True)]
    if samples > 0:
        rows.append(resample_counts(n, samples, seed) @ table / n)
    return np.vstack(rows)


def iso_accuracy(best_correct: np.ndarray, best_energy: np.ndarray, oracle_energy: np.ndarray,
                 policies: Mapping[str, tuple[np.ndarray, np.ndarray, list[str]]], tolerance: float,
                 samples: int = 1000, confidence: float = 0.95, seed: int = 0) -> dict:
    """Iso-accuracy energy share and share of the oracle's savings captured, per policy, with intervals.

    ``best_*`` and ``oracle_energy``: (queries,), the best single model's outcomes and the oracle's energy;
    ``policies[name]`` = (correct [queries, points], energy [queries, points], point names). Energies are in
    the view being reported.
    """
    columns = [best_correct, best_energy, oracle_energy]
    spans = {}
    for name, (correct, energy, points) in policies.items():
        if correct.shape != energy.shape or correct.ndim != 2 or correct.shape[1] != len(points):
            raise ValueError(f"policy '{name}': correct {correct.shape}, energy {energy.shape} and {len(points)} "
                             "point names must agree as [queries, points]")
        start = len(columns)
        columns += [correct[:, k] for k in range(correct.shape[1])] + [energy[:, k] for k in range(energy.shape[1])]
        spans[name] = (start, correct.shape[1])
    means = _means(columns, samples, seed)
    best_acc, best_j, oracle_j = means[:, 0], means[:, 1], means[:, 2]
    room = best_j - oracle_j

    def interval(values: np.ndarray) -> list[float] | None:
        finite = values[1:][np.isfinite(values[1:])]
        return percentile_interval(finite, confidence) if samples > 0 and finite.size else None

    out = {}
    for name, (start, width) in spans.items():
        acc, j = means[:, start:start + width], means[:, start + width:start + 2 * width]
        column, iso_j, share = iso_accuracy_point(acc, j, best_acc, best_j, tolerance)
        captured = np.where(room > 0, 100.0 * (best_j - iso_j) / np.where(room > 0, room, 1.0), np.nan)
        k = int(column[0])
        reached = k >= 0
        uses_point = reached and j[0, k] <= best_j[0]
        points = policies[name][2]
        out[name] = {
            "reached": reached,
            "point": points[k] if uses_point else None,  # None: the best single model itself
            "accuracy": float(acc[0, k]) if uses_point else float(best_acc[0]),
            "j_per_query": float(iso_j[0]),
            "energy_share": None if np.isnan(share[0]) else float(share[0]),
            "energy_share_ci": interval(share),
            "saving_pct": None if np.isnan(share[0]) else float(100.0 * (1.0 - share[0])),
            "oracle_savings_captured_pct": None if np.isnan(captured[0]) else float(captured[0]),
            "oracle_savings_captured_pct_ci": interval(captured),
        }
    return {"tolerance": tolerance, "best_accuracy": float(best_acc[0]), "best_j_per_query": float(best_j[0]),
            "oracle_j_per_query": float(oracle_j[0]),
            "oracle_energy_share": float(oracle_j[0] / best_j[0]) if best_j[0] > 0 else None,
            "samples": samples, "confidence": confidence, "seed": seed, "policies": out}
