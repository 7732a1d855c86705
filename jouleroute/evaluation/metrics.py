"""Per-policy metrics: accuracy, energy, latency, routing mix (overall and per task).

Pure functions over numpy arrays; formulas are in docs/metrics.md. A value
that is undefined (J per correct answer with no correct answer) is ``None``,
never NaN, so the JSON outputs stay valid.
"""

from __future__ import annotations

import numpy as np

from jouleroute.evaluation.outcomes import Outcome
from jouleroute.stats import percentile_interval, resample_index


def accuracy(correct: np.ndarray) -> float:
    return float(np.mean(correct))


def j_per_correct(correct: np.ndarray, energy_j: np.ndarray) -> float | None:
    """Total energy divided by the number of correct answers (None when nothing is correct)."""
    n_correct = float(np.sum(correct))
    return float(np.sum(energy_j)) / n_correct if n_correct > 0 else None


def candidate_share(choice: np.ndarray, candidates: list[str]) -> dict[str, float]:
    """Fraction of queries sent to each candidate (zeros included, so rows line up)."""
    counts = np.bincount(choice, minlength=len(candidates))
    return {c: float(counts[j]) / len(choice) for j, c in enumerate(candidates)}


def summarize(correct: np.ndarray, energy_j: np.ndarray, latency_s: np.ndarray, choice: np.ndarray,
              candidates: list[str]) -> dict:
    """The standard metric block of one policy on one set of queries."""
    return {
        "n_queries": int(len(correct)),
        "accuracy": accuracy(correct),
        "energy_total_j": float(np.sum(energy_j)),
        "j_per_query": float(np.mean(energy_j)),
        "energy_p95_j": float(np.percentile(energy_j, 95)),
        "j_per_correct": j_per_correct(correct, energy_j),
        "latency_p50_s": float(np.percentile(latency_s, 50)),
        "latency_p95_s": float(np.percentile(latency_s, 95)),
        "share": candidate_share(choice, candidates),
    }


def bootstrap_ci(correct: np.ndarray, energy_j: np.ndarray, samples: int, confidence: float,
                 seed: int) -> dict[str, list[float]]:
    """Percentile bootstrap intervals of accuracy and J/query, resampling queries with replacement."""
    idx = resample_index(len(correct), samples, seed)
    return {"accuracy_ci": percentile_interval(np.mean(correct[idx], axis=1), confidence),
            "j_per_query_ci": percentile_interval(np.mean(energy_j[idx], axis=1), confidence)}


def outcome_metrics(o: Outcome, tasks: np.ndarray, candidates: list[str], with_overhead: bool,
                    bootstrap: tuple[int, float, int] | None) -> dict:
    """Overall and per-task metrics of one outcome in one view (with or without router overhead).

    ``bootstrap`` is (samples, confidence, seed) or None.
    """
    energy, latency = o.energy(with_overhead), o.latency(with_overhead)
    out = summarize(o.correct, energy, latency, o.choice, candidates)
    out["overhead_j_per_query"] = float(np.mean(o.overhead_energy_j)) if with_overhead else 0.0
    if bootstrap is not None and bootstrap[0] > 0:
        out.update(bootstrap_ci(o.correct, energy, *bootstrap))
    out["per_task"] = {
        str(task): summarize(o.correct[mask], energy[mask], latency[mask], o.choice[mask], candidates)
        for task in sorted(set(tasks))
        for mask in [tasks == task]
    }
    return out
