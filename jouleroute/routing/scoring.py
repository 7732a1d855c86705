"""The energy-aware decision rule shared by the learned baselines.

A learned baseline predicts, for each query and candidate, the probability of a
correct answer and the energy of answering. The decision is

    choice(q) = argmax_c  p(q, c) - lam * e~(q, c)

where ``e~`` is the energy normalized across the candidates of that query (see
``normalize_energy``). Ties go to the cheaper candidate. Predictions are kept in
``ScoredQueries`` so that a sweep over ``lam`` re-decides without re-embedding.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from jouleroute.routing.base import RoutingDecisions

# Floor for the log normalization: net energies can be zero or negative after idle subtraction.
_LOG_FLOOR_J = 1e-9


def normalize_energy(energy_j: np.ndarray, how: str) -> np.ndarray:
    """Scale each row of ``energy_j`` [queries, candidates] into [0, 1] across its candidates.

    - ``max``:    e / max_c e                        (the most expensive candidate is 1)
    - ``linear``: (e - min_c e) / (max_c e - min_c e) (cheapest 0, most expensive 1)
    - ``log``:    the same on log e                   (for pools spanning orders of magnitude)

    A row whose candidates all cost the same normalizes to zeros.
    """
    e = np.asarray(energy_j, dtype=np.float64)
    if e.ndim != 2:
        raise ValueError(f"energy must be [queries, candidates], got shape {e.shape}")
    if not np.all(np.isfinite(e)):
        raise ValueError("energy contains NaN or infinity; every candidate needs a predicted energy")
    if how == "max":
        top = e.max(axis=1, keepdims=True)
        safe = np.where(top > 0, top, 1.0)
        return np.where(top > 0, e / safe, 0.0)
    if how == "log":
        e = np.log(np.maximum(e, _LOG_FLOOR_J))
    elif how != "linear":
        raise ValueError(f"unknown energy_norm '{how}'; valid: max, linear, log")
    low = e.min(axis=1, keepdims=True)
    span = e.max(axis=1, keepdims=True) - low
    return np.where(span > 0, (e - low) / np.where(span > 0, span, 1.0), 0.0)


def choose(p_correct: np.ndarray, energy_j: np.ndarray, lam: float, energy_norm: str) -> np.ndarray:
    """Column index of the chosen candidate per row; ties broken toward lower energy."""
    if lam < 0:
        raise ValueError(f"lam must be >= 0, got {lam}")
    p = np.asarray(p_correct, dtype=np.float64)
    e = np.asarray(energy_j, dtype=np.float64)
    if p.shape != e.shape:
        raise ValueError(f"p_correct {p.shape} and energy {e.shape} must have the same shape")
    score = p - lam * normalize_energy(e, energy_norm)
    best = score.max(axis=1, keepdims=True)
    # Scores within float noise of the best are ties: prefer the cheaper of them.
    tied = score >= best - 1e-12
    return np.argmin(np.where(tied, e, np.inf), axis=1)


@dataclass
class ScoredQueries:
    """A learned router's predictions for a batch, ready to be decided at any ``lam``.

    ``overhead_*`` are per query (the batch window divided evenly) and do not
    depend on ``lam``: the router's cost is paid once, whatever it then decides.
    """

    query_ids: list[str]
    candidates: list[str]
    p_correct: np.ndarray  # [queries, candidates], in [0, 1]
    energy_j: np.ndarray  # [queries, candidates], predicted energy per answer
    energy_norm: str = "max"
    overhead_latency_s: list[float] = field(default_factory=list)
    overhead_energy_j: list[float] = field(default_factory=list)
    overhead_energy_source: str = "none"

    def __post_init__(self) -> None:
        want = (len(self.query_ids), len(self.candidates))
        for name in ("p_correct", "energy_j"):
            if getattr(self, name).shape != want:
                raise ValueError(f"{name} has shape {getattr(self, name).shape}, expected {want}")

    def decide(self, lam: float) -> RoutingDecisions:
        """Route every query with energy weight ``lam`` (0: most likely correct; large: cheapest)."""
        picks = choose(self.p_correct, self.energy_j, lam, self.energy_norm)
        return RoutingDecisions(
            query_ids=list(self.query_ids),
            candidate_ids=[self.candidates[i] for i in picks],
            overhead_latency_s=list(self.overhead_latency_s),
            overhead_energy_j=list(self.overhead_energy_j),
            overhead_energy_source=self.overhead_energy_source,
        )

    def sweep(self, lams: list[float]) -> dict[float, RoutingDecisions]:
        """``decide`` at each ``lam``; cheap, since predictions are reused."""
        return {lam: self.decide(lam) for lam in lams}
