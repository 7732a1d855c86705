"""Paired bootstrap of the energy-AIQ difference between the LM router and each other λ family.

Two families evaluated on the same test queries are compared on the same resamples: each resample
draws the queries with replacement (``rng.integers(0, Q, size=(samples, Q))`` from
``numpy.random.default_rng(seed)``), recomputes every single candidate's and every swept router's
accuracy and J/query on it, and from those each family's AIQ exactly as ``run.evaluate_outcomes``
does (the singles' frontier plus the family's points, over the singles' cost range). The decisions
are the ones made at each λ of the sweep; only the queries are resampled. The interval is the
percentile interval of ``AIQ(reference) − AIQ(family)``; its verdict is ``compare.difference_verdict``'s (``tie``
when the interval holds 0, else ``win``, the reference ahead, or ``loss``).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from jouleroute.evaluation.frontier import aiq
from jouleroute.policy.compare import difference_verdict
from jouleroute.stats import percentile_interval, resample_counts


def family_aiq(single_acc: np.ndarray, single_j: np.ndarray, acc: np.ndarray, j: np.ndarray) -> float:
    """A family's AIQ: the singles' frontier plus the family's points, over the singles' cost range."""
    return aiq(np.concatenate([single_j, j]), np.concatenate([single_acc, acc]),
               (float(single_j.min()), float(single_j.max())))


def paired_aiq_difference(singles_correct: np.ndarray, singles_energy: np.ndarray,
                          families: Mapping[str, tuple[np.ndarray, np.ndarray]], reference: str = "lm",
                          samples: int = 1000, confidence: float = 0.95, seed: int = 0) -> dict:
    """``AIQ(reference) − AIQ(f)`` for every other family ``f``, with its paired-bootstrap interval.

    ``singles_correct`` / ``singles_energy``: [queries, singles], every candidate always chosen;
    ``families[f]`` = (correct, energy), each [queries, λ points], the family's outcome at each λ.
    Energies are per query in the view being compared (with or without the router's overhead).
    """
    if reference not in families:
        raise ValueError(f"reference family '{reference}' not among {sorted(families)}")
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    if not 0.5 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0.5, 1), got {confidence}")
    n = singles_correct.shape[0]
    blocks = [np.asarray(singles_correct, float), np.asarray(singles_energy, float)]
    for name, (correct, energy) in families.items():
        if correct.shape != energy.shape or correct.shape[0] != n:
            raise ValueError(f"family '{name}': correct {correct.shape} and energy {energy.shape} must both be "
                             f"[{n} queries, λ points]")
        blocks += [np.asarray(correct, float), np.asarray(energy, float)]
    table = np.concatenate(blocks, axis=1)  # every column's mean, on the full sample and on each resample
    means = np.vstack([table.mean(axis=0), resample_counts(n, samples, seed) @ table / n])
    s = singles_correct.shape[1]
    columns, start = {}, 2 * s
    for name, (correct, _) in families.items():
        width = correct.shape[1]
        columns[name] = (slice(start, start + width), slice(start + width, start + 2 * width))
        start += 2 * width

    def aiqs(name: str) -> np.ndarray:
        acc, j = columns[name]
        return np.array([family_aiq(row[:s], row[s:2 * s], row[acc], row[j]) for row in means])

    ref = aiqs(reference)
    out = {}
    for name in families:
        if name == reference:
            continue
        other = aiqs(name)
        diff = ref - other
        low, high = percentile_interval(diff[1:], confidence)
        out[name] = {"aiq": float(other[0]), "reference_aiq": float(ref[0]), "difference": float(diff[0]),
                     "ci_low": low, "ci_high": high, "verdict": difference_verdict([low, high])}
    return {"reference": reference, "samples": samples, "confidence": confidence, "seed": seed,
            "n_queries": n, "families": out}
