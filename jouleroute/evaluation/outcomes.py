"""What each router's choices cost and earned, looked up in the profile.

The profile is turned once into query x candidate matrices (correct, energy,
latency, energy_source). A router's outcome is then one candidate index per
query; its correctness and energy are read off the matrices, and its own
overhead (from RoutingDecisions) is kept apart so metrics can be reported with
and without it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from jouleroute.routing.base import RoutingDecisions
from jouleroute.routing.scores import oracle_index as scores_oracle_index

NO_SOURCE = "none"  # overhead_energy_source of zero-cost routers (oracle, always-X)


@dataclass(frozen=True)
class RouterRun:
    """One router's decisions on the evaluation split. ``lam`` is set for lambda-family members."""

    name: str
    family: str
    lam: float | None
    decisions: RoutingDecisions


@dataclass
class ProfileMatrix:
    """The profile of one split as aligned query x candidate arrays."""

    query_ids: list[str]
    tasks: np.ndarray  # (Q,) task of each query
    candidates: list[str]
    correct: np.ndarray  # (Q, C) expected correctness in [0, 1] (0/1 for a tournament)
    energy_j: np.ndarray  # (Q, C)
    latency_s: np.ndarray  # (Q, C)
    source: np.ndarray  # (Q, C) energy_source label of each cell


@dataclass
class Outcome:
    """Per-query result of one policy (single candidate, oracle or router)."""

    name: str
    kind: str  # "single" | "oracle" | "router"
    family: str
    lam: float | None
    choice: np.ndarray  # (Q,) candidate index
    correct: np.ndarray  # (Q,)
    energy_j: np.ndarray  # (Q,) energy of the chosen candidate
    latency_s: np.ndarray  # (Q,)
    overhead_energy_j: np.ndarray  # (Q,) the router's own cost
    overhead_latency_s: np.ndarray  # (Q,)
    model_sources: frozenset[str]
    overhead_source: str

    @property
    def key(self) -> str:
        """Unique across kinds, so a router may share a name with a candidate (e.g. an "oracle" router)."""
        return f"{self.kind}:{self.name}"

    def energy(self, with_overhead: bool) -> np.ndarray:
        return self.energy_j + self.overhead_energy_j if with_overhead else self.energy_j

    def latency(self, with_overhead: bool) -> np.ndarray:
        return self.latency_s + self.overhead_latency_s if with_overhead else self.latency_s

    def sources(self, with_overhead: bool) -> frozenset[str]:
        extra = {self.overhead_source} if with_overhead and self.overhead_source != NO_SOURCE else set()
        return self.model_sources | extra


def build_matrix(profile: pd.DataFrame, queries: pd.DataFrame, split: str, energy_column: str) -> ProfileMatrix:
    """Align the profile rows of ``split`` into matrices; every (query, candidate) must be present once."""
    need = {"query_id", "task", "split"} - set(queries.columns)
    if need:
        raise ValueError(f"query table lacks column(s) {sorted(need)}")
    split_queries = queries[queries["split"] == split].drop_duplicates("query_id").sort_values("query_id")
    if split_queries.empty:
        raise ValueError(f"query table has no queries in split '{split}'")
    query_ids = split_queries["query_id"].tolist()
    rows = profile[profile["query_id"].isin(set(query_ids))]
    dup = rows.duplicated(["query_id", "candidate_id"])
    if dup.any():
        first = rows[dup].iloc[0]
        raise ValueError(f"profile: pair (query_id={first.query_id!r}, candidate_id={first.candidate_id!r}) "
                         "appears more than once; run stage `validate`")
    candidates = sorted(rows["candidate_id"].unique())

    def pivot(column: str) -> np.ndarray:
        wide = rows.pivot(index="query_id", columns="candidate_id", values=column).reindex(
            index=query_ids, columns=candidates)
        if wide.isna().to_numpy().any():
            q, c = np.argwhere(wide.isna().to_numpy())[0]
            raise ValueError(f"profile: no value of {column} for (query_id={query_ids[q]!r}, "
                             f"candidate_id={candidates[c]!r}); every test query needs every candidate")
        return wide.to_numpy()

    return ProfileMatrix(
        query_ids=query_ids,
        tasks=split_queries["task"].to_numpy(dtype=object),
        candidates=candidates,
        correct=pivot("correct").astype(float),
        energy_j=pivot(energy_column).astype(float),
        latency_s=pivot("latency_s").astype(float),
        source=pivot("energy_source").astype(object),
    )


def _outcome(m: ProfileMatrix, name: str, kind: str, family: str, lam: float | None, choice: np.ndarray,
             overhead_e: np.ndarray, overhead_t: np.ndarray, overhead_source: str) -> Outcome:
    rows = np.arange(len(choice))
    return Outcome(
        name=name, kind=kind, family=family, lam=lam, choice=choice,
        correct=m.correct[rows, choice], energy_j=m.energy_j[rows, choice], latency_s=m.latency_s[rows, choice],
        overhead_energy_j=overhead_e, overhead_latency_s=overhead_t,
        model_sources=frozenset(m.source[rows, choice]), overhead_source=overhead_source,
    )


def single_outcomes(m: ProfileMatrix) -> list[Outcome]:
    """"Always candidate c", for every c in the pool."""
    zeros = np.zeros(len(m.query_ids))
    return [_outcome(m, c, "single", "single", None, np.full(len(m.query_ids), j), zeros, zeros, NO_SOURCE)
            for j, c in enumerate(m.candidates)]


def oracle_index(m: ProfileMatrix) -> np.ndarray:
    """Per query: the cheapest of the candidates with the highest (expected) correctness; on 0/1 outcomes
    the cheapest correct candidate, or the cheapest one when none is correct.

    Ties go to the earlier candidate id (candidates are sorted), so the oracle is deterministic.
    """
    return scores_oracle_index(m.correct.astype(float), m.energy_j.astype(float))  # routing.scores: the one rule


def oracle_outcome(m: ProfileMatrix) -> Outcome:
    zeros = np.zeros(len(m.query_ids))
    return _outcome(m, "oracle", "oracle", "oracle", None, oracle_index(m), zeros, zeros, NO_SOURCE)


def oracle_choices(profile: pd.DataFrame, energy_column: str = "energy_j") -> pd.Series:
    """Oracle candidate id per query_id, over every query in ``profile`` (for an OracleRouter)."""
    queries = profile[["query_id", "task", "split"]].drop_duplicates("query_id")
    chosen: list[pd.Series] = []
    for split in queries["split"].unique():
        m = build_matrix(profile, queries, split, energy_column)
        chosen.append(pd.Series(np.asarray(m.candidates)[oracle_index(m)], index=m.query_ids))
    return pd.concat(chosen).sort_index().rename("candidate_id").rename_axis("query_id")


def _per_query(values: list[float], n: int, what: str, run: RouterRun) -> np.ndarray:
    if not values:
        if run.decisions.overhead_energy_source != NO_SOURCE:
            raise ValueError(f"router '{run.name}': {what} is empty but overhead_energy_source is "
                             f"'{run.decisions.overhead_energy_source}'; give one value per query")
        return np.zeros(n)
    if len(values) != n:
        raise ValueError(f"router '{run.name}': {what} has {len(values)} values for {n} queries")
    arr = np.asarray(values, dtype=float)
    if not np.isfinite(arr).all() or (arr < 0).any():
        raise ValueError(f"router '{run.name}': {what} must be finite and >= 0")
    return arr


def router_outcome(m: ProfileMatrix, run: RouterRun) -> Outcome:
    """Look a router's choices up in the profile; it must decide every evaluation query exactly once."""
    d = run.decisions
    if len(d.query_ids) != len(d.candidate_ids):
        raise ValueError(f"router '{run.name}': {len(d.query_ids)} query ids but {len(d.candidate_ids)} choices")
    by_query = dict(zip(d.query_ids, d.candidate_ids))
    if len(by_query) != len(d.query_ids):
        raise ValueError(f"router '{run.name}': some query ids are decided more than once")
    missing = [q for q in m.query_ids if q not in by_query]
    extra = sorted(set(by_query) - set(m.query_ids))
    if missing or extra:
        raise ValueError(f"router '{run.name}' must decide exactly the evaluation queries: "
                         f"missing {missing[:5]} ({len(missing)}), not in the split {extra[:5]} ({len(extra)})")
    col = {c: j for j, c in enumerate(m.candidates)}
    unknown = sorted({c for c in d.candidate_ids if c not in col})
    if unknown:
        raise ValueError(f"router '{run.name}' chose candidate(s) {unknown} that are not in the profile {m.candidates}")
    position = {q: i for i, q in enumerate(d.query_ids)}
    order = np.array([position[q] for q in m.query_ids])  # the router's order -> the matrix's order
    choice = np.array([col[d.candidate_ids[i]] for i in order])
    n = len(m.query_ids)
    energy = _per_query(d.overhead_energy_j, n, "overhead_energy_j", run)[order]
    latency = _per_query(d.overhead_latency_s, n, "overhead_latency_s", run)[order]
    return _outcome(m, run.name, "router", run.family, run.lam, choice, energy, latency, d.overhead_energy_source)


@dataclass(frozen=True)
class CascadeOutcome:
    """A deployed cascade on the evaluation split: every call's joules per query (it runs no router)."""

    correct: np.ndarray
    energy_j: np.ndarray
    sources: frozenset[str]
    overhead_source: str = NO_SOURCE

    def energy(self, with_overhead: bool) -> np.ndarray:
        return self.energy_j


def cascade_outcome(profile, m: ProfileMatrix, deployed: dict) -> CascadeOutcome:
    """The deployed chain (``deployed``: its ``stages`` and ``max_output_tokens``) simulated on ``m``'s queries."""
    from jouleroute.cascade.chain import Chain, simulate
    from jouleroute.cascade.matrix import cascade_matrix

    chain = Chain(tuple(tuple(s) for s in deployed["stages"]), deployed["max_output_tokens"])
    out = simulate(chain, cascade_matrix(profile, m))
    return CascadeOutcome(out.correct.astype(float), out.energy_j, frozenset(out.sources))
