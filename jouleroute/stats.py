"""The paired bootstrap, once: the interval of a mean per-query difference, resampling queries with replacement.

Every "is this a win or a tie" in jouleroute (the champion's val margin, the budget curve's points, the
experiments' records) is this interval of mean(a − b) over the queries both were scored on; a difference is a
win only when the interval excludes 0. AIQ differences resample the same way (``evaluation.bootstrap``) but
recompute a frontier per resample, so they draw counts instead (``resample_counts``).
"""

from __future__ import annotations

import numpy as np

SAMPLES, SEED, CONFIDENCE = 1000, 0, 0.95


def paired_mean_ci(diff, samples: int = SAMPLES, seed: int = SEED, confidence: float = CONFIDENCE) -> list[float] | None:
    """Percentile bootstrap interval of ``mean(diff)`` (one value per query); ``None`` without queries."""
    diff = np.asarray(diff, dtype=float)
    if diff.size == 0:
        return None
    return percentile_interval(diff[resample_index(diff.size, samples, seed)].mean(axis=1), confidence)


def resample_index(n: int, samples: int = SAMPLES, seed: int = SEED) -> np.ndarray:
    """[samples, n] query positions drawn with replacement: the one resampling of every bootstrap here (paired:
    one draw serves every policy scored on the same queries)."""
    return np.random.default_rng(seed).integers(0, n, size=(samples, n))


def percentile_interval(values, confidence: float = CONFIDENCE) -> list[float]:
    """The central ``confidence`` percentile interval of resampled ``values``: every bootstrap's interval."""
    tail = 100 * (1 - confidence) / 2
    return [float(x) for x in np.percentile(values, [tail, 100 - tail])]


def resample_counts(n: int, samples: int, seed: int) -> np.ndarray:
    """[samples, n]: how often each query is drawn in each resample (paired: one draw serves every policy)."""
    idx = resample_index(n, samples, seed)
    offsets = (np.arange(samples) * n)[:, None]
    return np.bincount((idx + offsets).ravel(), minlength=samples * n).reshape(samples, n)
