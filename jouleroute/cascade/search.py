"""Choose a chain on selection data: enumerate a bounded family of chains once, then pick one per target.

**The family.** A *unit* is a non-final stage: one candidate (accepting on its own check) or a pair (accepting
on agreement; ``max_stage_size=3`` adds triples). A chain is ``final`` alone, ``unit > final`` or
``unit > unit > final``, its stages disjoint, the final stage any single candidate, under one output-length bound
from ``token_bounds`` (default: none, and the 50th, 75th and 90th percentiles of the selection outputs' lengths,
pooled over candidates). Units whose selection J/query is at least the best single's are pruned: a chain starting
with one costs more than the best single, which a cascade exists to undercut.

**The cost.** With K candidates, B bounds and U = K + K(K-1)/2 units (pairs; + K(K-1)(K-2)/6 with triples), the
family holds about B·U²·K chains, O(B·K⁵) with pairs. Each is scored without simulating it: a chain's selection
accuracy and J/query are sums of per-query terms (what the first unit answers, what the second answers of the
rest, what the final pays for the remainder), so for each first unit one [U, Q] × [Q, K] matrix product scores
every (second unit, final) at once: O(B·U²·Q·K) multiply-adds, ~10⁹ for K = 11 and Q = 3000 (seconds on one
core; the agreement bits, ``agreement.agreement_bits``, are computed once before). The chosen chain is then
simulated (``chain.simulate``) for its figures.

**The choice** of a chain per target is the policy layer's (policy/cascade_choice.py, by the one rule that meets
a target); ``pareto`` gives the selection frontier (accuracy against J/query) for plots and for ``above_best``.
The best single (the caller's, policy/singles.py, on the same selection queries) is the yardstick of every share
and difference. Nothing here reads a test outcome.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from jouleroute.cascade.chain import Chain, simulate, single_accepts, stage_answer
from jouleroute.cascade.matrix import CascadeMatrix

logger = logging.getLogger(__name__)

_EPS = 1e-12
DEFAULT_BOUND_PERCENTILES = (50, 75, 90)


@dataclass
class ChainSpace:
    """Every chain of the family with its selection accuracy and J/query (one row per chain)."""

    candidates: list[str]
    bounds: list[int | None]
    units: list[tuple[int, ...]]  # column indices of each non-final stage
    bound: np.ndarray  # (N,) index into bounds
    first: np.ndarray  # (N,) unit index, -1: none
    second: np.ndarray  # (N,) unit index, -1: none
    final: np.ndarray  # (N,) column index of the final stage
    accuracy: np.ndarray  # (N,)
    j_per_query: np.ndarray  # (N,)
    best: int  # column of the best single
    n_queries: int
    seconds: float = 0.0
    pruned_units: list[str] = field(default_factory=list)

    def chain(self, i: int) -> Chain:
        stages = [self.units[u] for u in (self.first[i], self.second[i]) if u >= 0] + [(int(self.final[i]),)]
        return Chain(tuple(tuple(self.candidates[c] for c in s) for s in stages), self.bounds[self.bound[i]])

    @property
    def best_accuracy(self) -> float:
        return float(self.accuracy[self._best_row])

    @property
    def best_j_per_query(self) -> float:
        return float(self.j_per_query[self._best_row])

    @property
    def _best_row(self) -> int:
        return int(np.flatnonzero((self.first < 0) & (self.second < 0) & (self.final == self.best))[0])


def default_bounds(m: CascadeMatrix, percentiles: Sequence[float] = DEFAULT_BOUND_PERCENTILES) -> list[int | None]:
    """No bound, then the pooled selection output lengths' percentiles (distinct, rounded up)."""
    found = sorted({int(np.ceil(v)) for v in np.percentile(m.output_tokens, list(percentiles))} - {0})
    return [None, *found]


def _units(k: int, size: int) -> list[tuple[int, ...]]:
    return [u for n in range(1, size + 1) for u in itertools.combinations(range(k), n)]


def _unit_terms(m: CascadeMatrix, units: list[tuple[int, ...]], bound: int | None):
    """[U, Q] accept (0/1), accept × correct, and energy of each unit as a non-final stage."""
    q = len(m.query_ids)
    accept, gained, energy = (np.zeros((len(units), q)) for _ in range(3))
    rows = np.arange(q)
    for i, unit in enumerate(units):
        if len(unit) == 1:
            ok, chosen = single_accepts(m, unit[0], bound), np.full(q, unit[0])
        else:
            ok, chosen = stage_answer(m, list(unit))
        accept[i] = ok
        gained[i] = ok * m.correct[rows, chosen]
        energy[i] = m.energy_j[:, list(unit)].sum(axis=1)
    return accept, gained, energy


def search(m: CascadeMatrix, best: str, token_bounds: Sequence[int | None] | None = None,
           max_stage_size: int = 2) -> ChainSpace:
    """Score every chain of the family (module doc) on the selection matrix ``m``; ``best``: the best single."""
    started = time.perf_counter()
    k, q = len(m.candidates), len(m.query_ids)
    if q == 0:
        raise ValueError("cascade search: the selection matrix has no query")
    best_col = m.column(best)
    bounds = list(default_bounds(m) if token_bounds is None else token_bounds)
    if not bounds:
        raise ValueError("cascade search: token_bounds is empty; give [null] for no length bound")
    best_j = float(m.energy_j[:, best_col].mean())
    every = _units(k, max_stage_size)
    units = [u for u in every if m.energy_j[:, list(u)].sum(axis=1).mean() < best_j - _EPS]
    pruned = ["+".join(m.candidates[c] for c in u) for u in every if u not in units]
    masks = np.array([sum(1 << c for c in u) for u in units], dtype=np.int64)
    has_single = np.array([len(u) == 1 for u in units], dtype=bool)
    final_bits = (1 << np.arange(k)).astype(np.int64)
    final_c, final_e = m.correct, m.energy_j
    parts: list[tuple[np.ndarray, ...]] = [
        (np.zeros(k, int), np.full(k, -1), np.full(k, -1), np.arange(k), final_c.mean(0), final_e.mean(0))]
    for b, bound in enumerate(bounds):
        accept, gained, energy = _unit_terms(m, units, bound)
        rest = 1.0 - accept
        keep_units = np.ones(len(units), bool) if b == 0 else has_single  # a bound only changes single units
        # unit > final
        acc2 = (gained.sum(1)[:, None] + rest @ final_c) / q
        j2 = (energy.sum(1)[:, None] + rest @ final_e) / q
        ok2 = ((masks[:, None] & final_bits[None, :]) == 0) & keep_units[:, None]
        u1, f = np.nonzero(ok2)
        parts.append((np.full(u1.size, b), u1, np.full(u1.size, -1), f, acc2[u1, f], j2[u1, f]))
        # unit > unit > final: one matrix product per first unit
        gained_sum, energy_sum = gained.sum(1), energy.sum(1)
        for first in range(len(units)):
            left = rest[first]
            both = rest * left  # [U, Q]: neither the first nor the second unit accepted
            base_acc = gained_sum[first] + gained @ left
            base_j = energy_sum[first] + energy @ left
            acc3 = (base_acc[:, None] + both @ final_c) / q
            j3 = (base_j[:, None] + both @ final_e) / q
            disjoint = (masks & masks[first]) == 0
            disjoint[first] = False
            used = masks | masks[first]
            ok3 = disjoint[:, None] & ((used[:, None] & final_bits[None, :]) == 0)
            if b > 0:
                ok3 &= (has_single | has_single[first])[:, None]
            u2, f = np.nonzero(ok3)
            parts.append((np.full(u2.size, b), np.full(u2.size, first), u2, f, acc3[u2, f], j3[u2, f]))
    bound_i, first_i, second_i, final_i, acc, joules = (np.concatenate(x) for x in zip(*parts))
    space = ChainSpace(list(m.candidates), bounds, units, bound_i, first_i, second_i, final_i, acc, joules, best_col,
                       q, time.perf_counter() - started, pruned)
    logger.info("cascade search: %d chains (%d candidates, %d units, %d bounds) on %d queries in %.1f s",
                len(acc), k, len(units), len(bounds), q, space.seconds)
    return space


def pareto(space: ChainSpace) -> list[int]:
    """Rows of the selection frontier: no other chain is as cheap and more accurate, or cheaper and as
    accurate; cheapest first."""
    order = np.lexsort((-space.accuracy, space.j_per_query))
    frontier, top = [], -np.inf
    for i in order:
        if space.accuracy[i] > top + _EPS:
            frontier.append(int(i))
            top = space.accuracy[i]
    return frontier


def pareto_points(space: ChainSpace) -> list[dict]:
    """The frontier as plot points: chain, accuracy, J/query and share of the best single's energy."""
    return [{"chain": space.chain(i).name, "stages": [list(s) for s in space.chain(i).stages],
             "max_output_tokens": space.chain(i).max_output_tokens, "accuracy": float(space.accuracy[i]),
             "j_per_query": float(space.j_per_query[i]),
             "energy_share_of_best": float(space.j_per_query[i] / space.best_j_per_query)} for i in pareto(space)]
