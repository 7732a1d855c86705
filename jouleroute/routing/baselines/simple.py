"""Routers that learn nothing: always-X, random at a given mix, and the oracle.

They bound the learned routers from both sides: always-X and random are what any
router must beat; the oracle, which reads the outcomes of the routed queries, is
the physical limit. None of them costs anything to run, so their overhead is
zero with source ``"none"``.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from jouleroute.routing.base import Router, RoutingDecisions, Scores
from jouleroute.routing.scores import oracle_index
from jouleroute.routing.families import register_family

log = logging.getLogger(__name__)


def query_ids_of(queries: pd.DataFrame) -> list[str]:
    if "query_id" not in queries.columns:
        raise ValueError(f"queries need a 'query_id' column; got {list(queries.columns)}")
    return queries["query_id"].astype(str).tolist()


def fixed_scores(query_ids: list[str], candidates: list[str], chosen: Sequence[str]) -> Scores:
    """Scores of a router that decided without weighing energy (merit 1 for its pick, no cost) and
    whose own cost is nil: every λ gives the same decisions."""
    n, column = len(query_ids), {c: i for i, c in enumerate(candidates)}
    merit = np.zeros((n, len(candidates)))
    merit[np.arange(n), [column[c] for c in chosen]] = 1.0
    zeros = np.zeros_like(merit)
    return Scores(query_ids, list(candidates), merit, zeros, zeros, overhead_latency_s=[0.0] * n,
                  overhead_energy_j=[0.0] * n, overhead_energy_source="none")


def mix_of(decisions: RoutingDecisions) -> dict[str, float]:
    """Share of queries sent to each candidate: feed it to ``RandomRouter`` to match a router's mix."""
    counts = Counter(decisions.candidate_ids)
    total = sum(counts.values())
    if total == 0:
        raise ValueError("no decisions to take a mix from")
    return {c: n / total for c, n in sorted(counts.items())}


@dataclass(frozen=True)
class RuleSetup:
    """What a family that is not learned may be built from (``registry.build_router`` passes them all; each rule
    takes what it reads): ``argument`` is the text after ``name:`` (``always:<candidate_id>``)."""

    argument: str
    candidates: Sequence[str]
    profile_train: pd.DataFrame
    seed: int = 0
    train_split: str = "train"
    energy_column: str = "energy_j"
    mix: Mapping[str, float] | None = None  # the random rule's (the learned router's mix)
    eval_profile: pd.DataFrame | None = None  # the oracle's: the profile rows of the queries it routes

    def no_argument(self, family: str) -> None:
        if self.argument:
            raise ValueError(f"router '{family}' takes no ':{self.argument}' argument")


class AlwaysRouter(Router):
    """Sends every query to one candidate."""

    def __init__(self, candidate: str, candidates: Sequence[str] | None = None):
        super().__init__(candidates if candidates is not None else [candidate])
        if candidate not in self.candidates:
            raise ValueError(f"'{candidate}' is not in the pool {self.candidates}")
        self.candidate = candidate
        self.name = f"always:{candidate}"

    @classmethod
    def from_setup(cls, setup: RuleSetup) -> "AlwaysRouter":
        if not setup.argument:
            raise ValueError(f"'always' needs a candidate: always:<candidate_id>, one of {list(setup.candidates)}")
        return cls(setup.argument, setup.candidates)

    def score(self, queries: pd.DataFrame) -> Scores:
        ids = query_ids_of(queries)
        return fixed_scores(ids, self.candidates, [self.candidate] * len(ids))


class RandomRouter(Router):
    """Random routing at a fixed mix, e.g. the learned router's, to show what the mix alone buys.

    The counts per candidate are fixed first (largest-remainder rounding of
    ``share x n``), then shuffled over the queries, so the realized mix matches the
    requested one to within one query per candidate rather than only on average.
    The same seed and queries give the same decisions.
    """

    name = "random"
    reference_rule = True  # evaluate routes the test queries with it, beside the learned routers

    @classmethod
    def from_setup(cls, setup: RuleSetup) -> "RandomRouter":
        """At ``setup.mix`` (the learned router's); without one, uniform over the pool."""
        setup.no_argument(cls.name)
        mix = setup.mix
        if mix is None:
            log.info("random router without a mix: uniform over %d candidates", len(setup.candidates))
            mix = {c: 1.0 for c in setup.candidates}
        outside = sorted(set(mix) - set(setup.candidates))
        if outside:
            raise ValueError(f"random mix names candidates outside the pool: {outside}")
        return cls(mix, seed=setup.seed)

    def __init__(self, mix: Mapping[str, float], seed: int = 0):
        shares = {c: float(s) for c, s in mix.items()}
        bad = {c: s for c, s in shares.items() if not np.isfinite(s) or s < 0}
        if bad:
            raise ValueError(f"mix shares must be finite and >= 0, got {bad}")
        total = sum(shares.values())
        if total <= 0:
            raise ValueError(f"mix shares sum to {total}; at least one must be positive")
        super().__init__(list(shares))
        self.mix = {c: s / total for c, s in shares.items()}
        self.seed = seed

    def _counts(self, n: int) -> np.ndarray:
        exact = np.array([self.mix[c] * n for c in self.candidates])
        counts = np.floor(exact).astype(int)
        # Hand the queries left over to the largest fractional parts (ties: pool order).
        order = np.argsort(-(exact - counts), kind="stable")
        counts[order[: n - counts.sum()]] += 1
        return counts

    def score(self, queries: pd.DataFrame) -> Scores:
        ids = query_ids_of(queries)
        slots = np.repeat(np.arange(len(self.candidates)), self._counts(len(ids)))
        np.random.default_rng(self.seed).shuffle(slots)
        return fixed_scores(ids, self.candidates, [self.candidates[i] for i in slots])


class OracleRouter(Router):
    """The cheapest correct candidate per query; the cheapest overall when none is correct.

    With an expected correctness in [0, 1]: the cheapest of the candidates with the highest expectation.

    Needs the profile rows of the queries it routes, so it is an upper bound on
    what routing can achieve on them, not a router one could deploy.
    """

    name = "oracle"

    @classmethod
    def from_setup(cls, setup: RuleSetup) -> "OracleRouter":
        setup.no_argument(cls.name)
        if setup.eval_profile is None:
            raise ValueError("the oracle needs eval_profile: the profile rows of the queries it will route")
        return cls(setup.eval_profile, setup.candidates, energy_column=setup.energy_column)

    def __init__(
        self,
        profile: pd.DataFrame,
        candidates: Sequence[str] | None = None,
        energy_column: str = "energy_j",
    ):
        need = {"query_id", "candidate_id", "correct", energy_column}
        missing = sorted(need - set(profile.columns))
        if missing:
            raise ValueError(f"oracle profile lacks columns {missing}")
        pool = list(candidates) if candidates is not None else sorted(profile["candidate_id"].unique())
        super().__init__(pool)
        rows = profile[profile["candidate_id"].isin(self.candidates)]
        dup = rows.duplicated(["query_id", "candidate_id"])
        if dup.any():
            first = rows[dup].iloc[0]
            raise ValueError(
                f"oracle profile has {int(dup.sum())} repeated (query_id, candidate_id) rows, "
                f"first at row {rows.index[dup][0]}: ({first['query_id']}, {first['candidate_id']})"
            )
        # routing.scores.oracle_index, the rule the evaluation's oracle uses; columns sorted: ties to the lower id
        correct = rows.pivot(index="query_id", columns="candidate_id", values="correct").astype(float)
        energy = rows.pivot(index="query_id", columns="candidate_id", values=energy_column).astype(float)
        columns = sorted(correct.columns)
        chosen = oracle_index(correct[columns].to_numpy(), energy.reindex(columns=columns).to_numpy())
        self.choice = dict(zip(correct.index, np.asarray(columns)[chosen]))

    def score(self, queries: pd.DataFrame) -> Scores:
        ids = query_ids_of(queries)
        unknown = [q for q in ids if q not in self.choice]
        if unknown:
            raise ValueError(
                f"oracle has no profile rows for {len(unknown)} routed queries (first: {unknown[:3]}); "
                "give it the profile of the split being routed"
            )
        return fixed_scores(ids, self.candidates, [self.choice[q] for q in ids])


# not learned, no params sub-section: built by their from_setup (registry.build_router); evaluate scores
# "always" per candidate as the single models and the oracle on the test profile, and routes the test queries with
# each reference_rule family in baselines.families (random, at the LM router's mix)
register_family("always", AlwaysRouter, learned=False, rank=0)
register_family("random", RandomRouter, learned=False, rank=1)
register_family("oracle", OracleRouter, learned=False, rank=2)
