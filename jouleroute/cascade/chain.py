"""A cascade: stages of candidates asked in turn, each stage read before the next is asked.

A ``Chain`` is a tuple of stages, each a tuple of candidate ids asked in parallel (no candidate in two stages),
plus one length bound. Per query, stage after stage:

- a **non-final stage of two or more members accepts** when at least two of its members' answers agree
  (``agreement``). The accepted answer is the member with the most agreeing partners in the stage (ties: the
  earlier member in the stage), and the query's correctness is that member's ``correct``;
- a **non-final stage of one member accepts** when its answer was extracted (it can agree with something) and,
  with ``max_output_tokens`` set, its output is shorter than the bound (``output_tokens < max_output_tokens``):
  a long output is a model that struggled;
- otherwise the next stage is asked. **The last stage always answers**: a single member with its answer; several
  members by the same majority rule (the member with the most agreeing partners, ties and no agreement at all:
  the first member).

Every model asked is paid for: a query's energy is the sum of the joules of every member of every stage it
reached, its latency the sum over those stages of the slowest member's (members run in parallel). The energy
view is the matrix's (the ``energy_column`` its ProfileMatrix was built with) and the sources of every call are
kept, so a mix of measured and modelled joules is visible.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # a type only: the gateway reads a Chain without math-verify's import (matrix -> agreement)
    from jouleroute.cascade.matrix import CascadeMatrix


@dataclass(frozen=True)
class Chain:
    """Stages of candidate ids (module doc) and the single-member stages' output-length bound."""

    stages: tuple[tuple[str, ...], ...]
    max_output_tokens: int | None = None

    def __post_init__(self) -> None:
        stages = tuple(tuple(s) for s in self.stages)
        object.__setattr__(self, "stages", stages)
        if not stages or any(not s for s in stages):
            raise ValueError(f"a chain needs at least one stage and no empty stage, got {stages}")
        members = [c for s in stages for c in s]
        if len(set(members)) != len(members):
            raise ValueError(f"chain {stages}: a candidate appears twice; each is asked at most once per query")
        if self.max_output_tokens is not None and self.max_output_tokens < 1:
            raise ValueError(f"max_output_tokens must be >= 1 or null, got {self.max_output_tokens}")

    @property
    def name(self) -> str:
        """``a+b > c``, with the length bound when one is set: ``a > c [<512 tokens]``."""
        text = " > ".join("+".join(s) for s in self.stages)
        return text if self.max_output_tokens is None else f"{text} [<{self.max_output_tokens} tokens]"

    @property
    def candidates(self) -> tuple[str, ...]:
        return tuple(c for s in self.stages for c in s)


@dataclass
class CascadeOutcome:
    """Per-query result of one chain on one split."""

    chain: Chain
    correct: np.ndarray  # (Q,) the accepted answer's correctness
    energy_j: np.ndarray  # (Q,) joules of every model asked
    latency_s: np.ndarray  # (Q,) sum over the stages reached of the slowest member
    stopped_at: np.ndarray  # (Q,) index of the stage whose answer was taken
    sources: frozenset[str]  # energy_source of every call made

    @property
    def accuracy(self) -> float:
        return float(self.correct.mean()) if self.correct.size else float("nan")

    @property
    def j_per_query(self) -> float:
        return float(self.energy_j.mean()) if self.energy_j.size else float("nan")

    def stop_share(self) -> list[float]:
        """Share of the queries that stopped at each stage (sums to 1)."""
        n = max(1, self.stopped_at.size)
        return [float(np.sum(self.stopped_at == s)) / n for s in range(len(self.chain.stages))]


def stage_answer(m: CascadeMatrix, members: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(agreed, chosen) per query for a stage of ``members`` (column indices): whether two members agree, and
    the column whose answer the stage gives (most agreeing partners, ties to the earlier member)."""
    sub = m.agree[:, members][:, :, members].astype(int)
    partners = sub.sum(axis=2) - np.diagonal(sub, axis1=1, axis2=2)
    agreed = partners.max(axis=1) > 0
    return agreed, np.asarray(members)[partners.argmax(axis=1)]


def single_accepts(m: CascadeMatrix, column: int, max_output_tokens: int | None) -> np.ndarray:
    """(Q,) whether a one-member non-final stage accepts: an answer was extracted and the output is short enough."""
    ok = m.answered[:, column].copy()
    if max_output_tokens is not None:
        ok &= m.output_tokens[:, column] < max_output_tokens
    return ok


def simulate(chain: Chain, m: CascadeMatrix) -> CascadeOutcome:
    """Run ``chain`` over every query of ``m`` (module doc)."""
    q = len(m.query_ids)
    rows = np.arange(q)
    correct, energy, latency = np.zeros(q), np.zeros(q), np.zeros(q)
    stopped = np.full(q, -1)
    sources: set[str] = set()
    pending = np.ones(q, dtype=bool)
    last = len(chain.stages) - 1
    for s, stage in enumerate(chain.stages):
        members = [m.column(c) for c in stage]
        energy[pending] += m.energy_j[np.ix_(pending, members)].sum(axis=1)
        latency[pending] += m.latency_s[np.ix_(pending, members)].max(axis=1)
        sources |= set(m.source[np.ix_(pending, members)].ravel().tolist())
        if len(members) > 1:
            accepts, chosen = stage_answer(m, members)
        else:
            accepts, chosen = single_accepts(m, members[0], chain.max_output_tokens), np.full(q, members[0])
        take = pending & (accepts if s < last else True)
        correct[take] = m.correct[rows[take], chosen[take]]
        stopped[take] = s
        pending &= ~take
    return CascadeOutcome(chain, correct, energy, latency, stopped, frozenset(sources))
