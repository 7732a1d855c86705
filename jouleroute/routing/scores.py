"""The one routing contract: a router scores the pool once, and the decision at any λ follows.

Every router answers ``score(queries) -> Scores``. A ``Scores`` holds, per query and
candidate, a *merit* (how good the candidate is expected to be: a probability of a correct
answer for the baselines, label logits for the LM router) and a *cost* (its energy scaled to
[0, 1] across the pool by ``normalize_energy``). The decision rule is written once, here:

    value(q, c; λ) = merit(q, c) − λ · scale · cost(q, c)
    choice(q; λ)   = argmax_c value, ties to the cheaper candidate

``scale`` is merit units per unit of utility (1 for probabilities; the LM router's logits per
unit of utility). Training uses the same ``utility`` function (the GRPO policy is its
softmax), evaluation decides with ``Scores.decide`` and the gateway ranks with
``Scores.rank``, so the three can never disagree. Scoring is the expensive part; a λ sweep
re-decides from the same ``Scores`` for free.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np

from jouleroute.energy.config import ENERGY_NORMS, EnergyNorm  # noqa: F401  (the names, defined once there)

_LOG_FLOOR_J = 1e-9  # keeps ln() finite for a zero-energy answer (e.g. a cached one)
DEFAULT_LAM = 0.5  # router.lam's default (the reference λ, not the deployed one) and route()'s
TIE_TOLERANCE = 1e-9  # values this close to the best are ties (float noise such as 1 − 0.1·x)


def oracle_index(correct: np.ndarray, energy_j: np.ndarray) -> np.ndarray:
    """The oracle, once ([queries, candidates] in, a column per query out): the cheapest of the candidates with
    the highest (expected) correctness, within ``TIE_TOLERANCE``; on 0/1 outcomes the cheapest correct one, or the
    cheapest when none is. Equal energies go to the earlier column. A NaN correctness is never chosen while a
    candidate has one; a NaN energy counts as the most expensive."""
    correct = np.where(np.isnan(correct), -np.inf, correct)
    top = correct.max(axis=1, keepdims=True)
    penalty = np.where(correct >= top - TIE_TOLERANCE, 0.0, np.inf)  # only the most likely right ones
    return np.argmin(np.nan_to_num(energy_j, nan=np.inf, posinf=np.inf) + penalty, axis=1)


def best_of(values: Mapping[str, float], order: Mapping[str, tuple]) -> str:
    """The key of the highest value; values within ``TIE_TOLERANCE`` of it are ties, won by the lowest ``order``
    (energy, then pool position): the rule ``Scores.choices`` applies to a whole table, for one query."""
    top = max(values.values())
    return min((c for c, v in values.items() if v >= top - TIE_TOLERANCE), key=lambda c: order[c])


@dataclass
class RoutingDecisions:
    """What a router chose for a batch of queries, and what choosing cost.

    ``overhead_energy_j`` / ``overhead_latency_s`` are per query, measured with the
    tournament's meters; zero-cost routers (oracle, "always X") report zeros with
    ``overhead_energy_source = "none"``.
    """

    query_ids: list[str]
    candidate_ids: list[str]
    overhead_latency_s: list[float] = field(default_factory=list)
    overhead_energy_j: list[float] = field(default_factory=list)
    overhead_energy_source: str = "none"


def check_norm(how: str) -> str:
    if how not in ENERGY_NORMS:
        raise ValueError(f"unknown energy normalization '{how}'; valid: {', '.join(ENERGY_NORMS)}")
    return how


def normalize_energy(energy_j: np.ndarray, how: str) -> np.ndarray:
    """Scale each row of ``energy_j`` [queries, candidates] into [0, 1] across its candidates.

    - ``max``:    e / max_c e                         (the most expensive candidate is 1)
    - ``linear``: (e − min_c e) / (max_c e − min_c e)  (cheapest 0, most expensive 1)
    - ``log``:    the same on ln e                     (pools spanning orders of magnitude)

    A negative energy (an idle-subtracted measurement below idle, or a regression's
    prediction) counts as 0 J: no answer costs less than nothing. A row whose candidates all
    cost the same normalizes to zeros. NaN or infinity is an error.
    """
    check_norm(how)
    e = np.asarray(energy_j, dtype=np.float64)
    if e.ndim != 2:
        raise ValueError(f"energy must be [queries, candidates], got shape {e.shape}")
    if not np.all(np.isfinite(e)):
        raise ValueError("energy contains NaN or infinity; every candidate needs a finite energy")
    e = np.maximum(e, 0.0)
    if how == "max":
        top = e.max(axis=1, keepdims=True)
        return np.where(top > 0, e / np.where(top > 0, top, 1.0), 0.0)
    if how == "log":
        e = np.log(np.maximum(e, _LOG_FLOOR_J))
    low = e.min(axis=1, keepdims=True)
    span = e.max(axis=1, keepdims=True) - low
    return np.where(span > 0, (e - low) / np.where(span > 0, span, 1.0), 0.0)


def normalize_energy_map(energy_j: Mapping[str, float], how: str) -> dict[str, float]:
    """``normalize_energy`` for one query given as {candidate: joules}."""
    if not energy_j:
        check_norm(how)
        return {}
    names = list(energy_j)
    row = normalize_energy(np.array([[float(energy_j[c]) for c in names]]), how)[0]
    return {c: float(v) for c, v in zip(names, row)}


def energy_penalty(cost, lam, scale: float = 1.0):
    """λ · scale · cost, the energy term of the decision rule (numpy arrays or torch tensors alike)."""
    return lam * scale * cost


def utility(merit, cost, lam, scale: float = 1.0):
    """merit − λ · scale · cost: the decision rule's value (numpy arrays or torch tensors alike)."""
    return merit - energy_penalty(cost, lam, scale)


def _lambdas(lam, n: int) -> np.ndarray:
    """λ per query: a scalar for all, or one value per query (the gateway's per-request weights)."""
    lams = np.broadcast_to(np.asarray(lam, dtype=np.float64), (n,))
    if np.any(~np.isfinite(lams)) or np.any(lams < 0):
        raise ValueError(f"energy weight λ must be finite and >= 0, got {lam}")
    return lams


@dataclass
class Scores:
    """A router's scores for a batch of queries, ready to be decided at any λ.

    ``energy_j`` is what ties are broken on (lower wins, then pool order); ``overhead_*`` are
    per query, what scoring cost, and do not depend on λ: the router reads a query once.
    """

    query_ids: list[str]
    candidates: list[str]
    merit: np.ndarray  # [queries, candidates]
    cost: np.ndarray  # [queries, candidates], energy normalized to [0, 1] across the pool
    energy_j: np.ndarray  # [queries, candidates], the energies behind ``cost``: tie-breaks
    scale: float = 1.0  # merit units per unit of utility
    overhead_latency_s: list[float] = field(default_factory=list)
    overhead_energy_j: list[float] = field(default_factory=list)
    overhead_energy_source: str = "none"

    def __post_init__(self) -> None:
        want = (len(self.query_ids), len(self.candidates))
        for name in ("merit", "cost", "energy_j"):
            value = np.asarray(getattr(self, name), dtype=np.float64)
            if value.shape != want:
                raise ValueError(f"{name} has shape {value.shape}, expected {want} (queries, candidates)")
            setattr(self, name, value)
        if not self.scale > 0:
            raise ValueError(f"scale must be > 0, got {self.scale}")

    @classmethod
    def from_energy(cls, query_ids: Sequence[str], candidates: Sequence[str], merit: np.ndarray,
                    energy_j: np.ndarray, energy_norm: str, **rest) -> "Scores":
        """Scores whose cost is ``energy_j`` normalized across the pool with ``energy_norm``."""
        return cls(list(query_ids), list(candidates), merit, normalize_energy(energy_j, energy_norm),
                   np.asarray(energy_j, dtype=np.float64), **rest)

    def with_energy(self, energy_j: np.ndarray, energy_norm: str) -> "Scores":
        """The same merit with another energy estimate (e.g. per-query predictions), its cost normalized
        with ``energy_norm``; columns in ``candidates``' order."""
        energy = np.asarray(energy_j, dtype=np.float64)
        return replace(self, cost=normalize_energy(energy, energy_norm), energy_j=energy)

    def in_order(self, candidates: Sequence[str]) -> "Scores":
        """The same scores with the candidate columns in ``candidates``' order (the same set)."""
        if list(candidates) == self.candidates:
            return self
        if sorted(candidates) != sorted(self.candidates):
            raise ValueError(f"cannot reorder scores over {self.candidates} as {list(candidates)}: not the same pool")
        cols = [self.candidates.index(c) for c in candidates]
        return replace(self, candidates=list(candidates), merit=self.merit[:, cols], cost=self.cost[:, cols],
                       energy_j=self.energy_j[:, cols])

    def values(self, lam) -> np.ndarray:
        """[queries, candidates] value of each candidate at weight ``lam`` (scalar or per query)."""
        lams = _lambdas(lam, len(self.query_ids))
        return utility(self.merit, self.cost, lams[:, None], self.scale)

    def choices(self, lam) -> np.ndarray:
        """Column index of each query's choice; ties go to the lower energy, then to pool order."""
        value = self.values(lam)
        tied = value >= value.max(axis=1, keepdims=True) - TIE_TOLERANCE
        return np.argmin(np.where(tied, self.energy_j, np.inf), axis=1)

    def decide(self, lam) -> RoutingDecisions:
        """One candidate per query at energy weight ``lam`` (0: best merit; large: cheapest)."""
        picks = self.choices(lam)
        return RoutingDecisions(
            query_ids=list(self.query_ids), candidate_ids=[self.candidates[i] for i in picks],
            overhead_latency_s=list(self.overhead_latency_s), overhead_energy_j=list(self.overhead_energy_j),
            overhead_energy_source=self.overhead_energy_source)

    def rank(self, lam) -> list[list[str]]:
        """The pool per query, best first: the first is exactly ``decide(lam)``'s choice, the rest fallbacks."""
        value, picks = self.values(lam), self.choices(lam)
        out = []
        for row, first in zip(value, picks):
            rest = [int(i) for i in np.argsort(-row, kind="stable") if i != first]
            out.append([self.candidates[first]] + [self.candidates[i] for i in rest])
        return out

    def sweep(self, lams: Sequence[float]) -> dict[float, RoutingDecisions]:
        return {float(lam): self.decide(lam) for lam in lams}
