"""The one paired comparison of a policy with a reference single, and its verdict words.

Both meet the same queries: per query, the policy's correctness and joules (every call, its own cost included
where the caller counts it) beside the reference's. One set of bootstrap resamples of the queries
(``stats.resample_index``: the same seed draws the same resamples, so two comparisons with one seed are paired
with each other too) gives every figure its percentile interval:

- ``accuracy_diff``: the policy's accuracy − the reference's;
- ``energy_ratio``: the policy's J/query over the reference's (below 1: it saves energy).

The verdict words, the only ones jouleroute uses for an accuracy difference (``accuracy_verdict``): ``above``
(the interval lies above 0), ``non-inferior`` (its lower end is above −margin), ``inferior`` (its upper end is
below −margin), ``inconclusive`` (it straddles −margin), ``untested`` (no resamples). For the energy ratio
(``energy_verdict``): ``cheaper`` (the interval lies below 1), ``dearer`` (above 1), ``tie``, ``untested``. For a
difference where either side may lead, reference − other (``difference_verdict``, the AIQ comparison of router
families, ``evaluation.bootstrap``): ``win`` (the interval lies above 0), ``loss`` (below 0), ``tie`` (it holds 0).
"""

from __future__ import annotations

import numpy as np

from jouleroute.stats import percentile_interval, resample_index

_EPS = 1e-12


def accuracy_verdict(ci: list[float] | None, margin: float) -> str:
    """The accuracy difference's verdict at non-inferiority ``margin`` (module doc)."""
    if ci is None:
        return "untested"
    if ci[0] > 0:
        return "above"
    if ci[0] > -margin:
        return "non-inferior"
    return "inferior" if ci[1] < -margin else "inconclusive"


def energy_verdict(ci: list[float] | None) -> str:
    """The energy ratio's verdict (module doc)."""
    if ci is None:
        return "untested"
    return "cheaper" if ci[1] < 1 else "dearer" if ci[0] > 1 else "tie"


def difference_verdict(ci: list[float] | None) -> str:
    """The verdict of a reference − other difference (module doc)."""
    if ci is None:
        return "untested"
    return "tie" if ci[0] <= 0.0 <= ci[1] else "win" if ci[0] > 0.0 else "loss"


def compare(correct, energy, ref_correct, ref_energy, margin: float, samples: int, confidence: float,
            seed: int) -> dict:
    """The policy (per-query ``correct``, ``energy``) against the reference on the same queries (module doc)."""
    columns = np.stack([np.asarray(x, dtype=float) for x in (correct, energy, ref_correct, ref_energy)], axis=1)
    means = columns.mean(axis=0, keepdims=True)
    if samples > 0:
        means = np.vstack([means, columns[resample_index(len(columns), samples, seed)].mean(axis=1)])
    acc, joules, ref_acc, ref_j = means.T
    with np.errstate(divide="ignore", invalid="ignore"):
        figures = {"accuracy_diff": acc - ref_acc, "energy_ratio": joules / ref_j}
    out = {"accuracy": float(acc[0]), "j_per_query": float(joules[0]), "reference_accuracy": float(ref_acc[0]),
           "reference_j_per_query": float(ref_j[0]), "n_queries": len(columns), "samples": samples,
           "confidence": confidence, "margin": margin}
    for name, values in figures.items():
        out[name] = float(values[0]) if np.isfinite(values[0]) else None
        finite = values[1:][np.isfinite(values[1:])]
        out[f"{name}_ci"] = percentile_interval(finite, confidence) if finite.size else None
    return out | {"verdict": accuracy_verdict(out["accuracy_diff_ci"], margin),
                  "energy_verdict": energy_verdict(out["energy_ratio_ci"])}


def accuracy_intervals(correct: np.ndarray, ref_correct: np.ndarray, samples: int, confidence: float,
                       seed: int) -> list[list[float] | None]:
    """Per column of ``correct`` ([queries, points]): the paired interval of its accuracy difference with
    ``ref_correct`` (``None`` without resamples); an ``above_best`` target reads their lower ends."""
    if samples <= 0:
        return [None] * correct.shape[1]
    diff = np.asarray(correct, dtype=float) - np.asarray(ref_correct, dtype=float)[:, None]
    index = resample_index(len(diff), samples, seed)  # one column at a time: [samples, queries] each
    return [percentile_interval(diff[:, k][index].mean(axis=1), confidence) for k in range(diff.shape[1])]


def share_interval(energy, ref_energy, samples: int, confidence: float, seed: int) -> list[float] | None:
    """The paired interval of sum(``energy``) / sum(``ref_energy``) over the same resamples as ``compare`` (``None``
    without resamples): a share pooled over queries scored out of fold, whose folds differ in size."""
    if samples <= 0:
        return None
    index = resample_index(len(energy), samples, seed)
    return percentile_interval(np.asarray(energy)[index].sum(axis=1) / np.asarray(ref_energy)[index].sum(axis=1),
                               confidence)


def lower_ends(intervals: list[list[float] | None]) -> list[float | None]:
    return [None if ci is None else ci[0] for ci in intervals]
