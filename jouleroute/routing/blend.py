"""A learned combination of two routers' evidence: the LM router's reading of the query and kNN's neighbours.

Both merits are first put on the utility scale (merit / scale), then mixed:

    merit(q, c) = (1 − w) · merit_first(q, c) / scale_first + w · merit_second(q, c) / scale_second

``w`` (``weight``) and whose energy estimate decides the cost (``energy``: the first router's,
e.g. the LM router's task-mean energy, or the second's, e.g. kNN's per-query neighbour
energy) are chosen on val (``jouleroute.evaluation.val_utility.choose_blend``), never on
test. ``w = 0`` with ``energy = "first"`` is the first router unchanged. The blend reads each
query once per component, so its overhead is the sum of both.
"""

from __future__ import annotations

from typing import Literal

import pandas as pd

from jouleroute.routing.base import Router, Scores

EnergyFrom = Literal["first", "second"]


def blend_scores(first: Scores, second: Scores, weight: float, energy: EnergyFrom = "first") -> Scores:
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"blend weight must be in [0, 1], got {weight}")
    if first.query_ids != second.query_ids or sorted(first.candidates) != sorted(second.candidates):
        raise ValueError("blended scores must cover the same queries (in the same order) and the same candidates")
    second = second.in_order(first.candidates)
    if energy not in ("first", "second"):
        raise ValueError(f"blend energy must be 'first' or 'second', got {energy!r}")
    merit = (1.0 - weight) * first.merit / first.scale + weight * second.merit / second.scale
    cost_from = first if energy == "first" else second
    n = len(first.query_ids)

    def total(a: list[float], b: list[float]) -> list[float]:
        return [x + y for x, y in zip(a or [0.0] * n, b or [0.0] * n)]

    sources = {first.overhead_energy_source, second.overhead_energy_source} - {"none"}
    return Scores(list(first.query_ids), list(first.candidates), merit, cost_from.cost, cost_from.energy_j,
                  scale=1.0, overhead_latency_s=total(first.overhead_latency_s, second.overhead_latency_s),
                  overhead_energy_j=total(first.overhead_energy_j, second.overhead_energy_j),
                  overhead_energy_source="+".join(sorted(sources)) if sources else "none")


class BlendRouter(Router):
    """``first`` and ``second`` (same pool) scored on the same queries and mixed by ``blend_scores``."""

    def __init__(self, first: Router, second: Router, weight: float, energy: EnergyFrom = "first",
                 name: str | None = None):
        if sorted(first.candidates) != sorted(second.candidates):
            raise ValueError(f"blended routers must share the pool: {first.candidates} vs {second.candidates}")
        super().__init__(first.candidates)
        self.first, self.second, self.weight, self.energy = first, second, float(weight), energy
        self.name = name or f"{first.name}+{second.name}"
        self.default_lam = first.default_lam

    @property
    def tokenizer(self):
        """The first router's (the LM's): what the gateway counts prompt tokens with."""
        return getattr(self.first, "tokenizer", None)

    def score(self, queries: pd.DataFrame) -> Scores:
        return blend_scores(self.first.score(queries), self.second.score(queries), self.weight, self.energy)


def blend_grid(weights: list[float]) -> list[tuple[float, EnergyFrom]]:
    """Every (weight, energy) pair to try on val; weight 0 with the first router's energy comes first."""
    pairs: list[tuple[float, EnergyFrom]] = []
    for energy in ("first", "second"):
        pairs += [(float(w), energy) for w in weights]
    return pairs
