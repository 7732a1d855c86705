"""Both policies on the newest held-out traffic: what each deployed policy picks for a query, and what that pick
scored on the iteration's labelled profile.

A deployed route or single model is read from its champion folder as the gateway reads it (gateway/router_build.py
``champion_router``: a route's router loaded as fitted at its deployed λ, a single model's every query), then asked
to rank each test query as a request would be (the query's text, its task when the router knows it). The pick's
``correct`` (its label: gold, a reference, a vote or feedback) and joules (``energy_policy.column``) come from the
labelled profile, where the tournament answered every test query with every candidate. A deployed cascade has no
one pick: its chain is simulated on the same labelled profile as the evaluate stage simulates it
(evaluation/outcomes.py ``cascade_outcome``: the answers each stage's models gave, whether they agree, every call's
joules). The gate compares answer joules: a router's own overhead is the same kind of cost for both and is left out
of the pairing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from jouleroute.policy.kinds import KINDS

logger = logging.getLogger(__name__)


class CannotScore(ValueError):
    """A policy the gate cannot score on this traffic; the message says why and what to do."""


@dataclass
class PolicyPicks:
    version: str
    kind: str
    picks: list[str] | None  # per test query, in the queries' order (None: a cascade, simulated instead)
    deployed: dict | None = None  # champion.json's ``deployed``: a cascade's chain


def policy_picks(params, root: Path, champion: Path, queries: pd.DataFrame, version: str) -> PolicyPicks:
    """What the deployed policy in ``champion`` answers each of ``queries`` with (module doc)."""
    from jouleroute.energy import make_meter
    from jouleroute.energy.config import EnergyConfig
    from jouleroute.gateway.routers import Query
    from jouleroute.gateway.router_build import champion_router
    from jouleroute.policy.kinds import deployed_policy
    from jouleroute.routing.champion import read_champion

    record = read_champion(champion)
    if record is None:
        raise CannotScore(f"{champion}: holds no champion (its champion.json names none)")
    deployed = deployed_policy(record, str(champion / "champion.json"))
    if KINDS[deployed["kind"]].picks is None:  # a chain: simulated on the labelled profile (module doc)
        return PolicyPicks(version, deployed["kind"], None, deployed)
    # the gateway's own reading of the folder: params whose evaluate_dir holds it (the folder is named champion)
    paths = params.paths.model_copy(update={"evaluate_dir": str(champion.parent)})
    at = params.model_copy(update={"paths": paths})
    router = champion_router(at, root, make_meter(EnergyConfig(meter="estimate")), target_asked=False)
    known = router.known_tasks()
    asked = [Query(text=q, task=t if known is None or t in known else "", lam=router.default_lam)
             for q, t in zip(queries["question"], queries["task"])]
    picks: list[str] = []
    for start in range(0, len(asked), router.batch_size):
        picks += [r.ranking[0] for r in router.rank(asked[start:start + router.batch_size])]
    return PolicyPicks(version, deployed["kind"], picks)


def policy_outcomes(policy: PolicyPicks, query_ids: list[str], profile: pd.DataFrame, energy_column: str
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(correct, joules) of ``policy`` on each query of the labelled profile; NaN where it has no label."""
    if policy.picks is not None:
        return outcomes(policy.picks, query_ids, profile, energy_column)
    return chain_outcomes(policy.deployed, query_ids, profile, energy_column)


def chain_outcomes(deployed: dict, query_ids: list[str], profile: pd.DataFrame, energy_column: str
                   ) -> tuple[np.ndarray, np.ndarray]:
    """A deployed chain simulated on the queries whose every candidate is labelled (evaluate's simulation); NaN for
    the others."""
    from jouleroute.evaluation.outcomes import build_matrix, cascade_outcome

    rows = profile[profile["query_id"].isin(set(query_ids))]
    complete = rows.groupby("query_id")["correct"].apply(lambda s: bool(s.notna().all()))
    ids = [q for q in query_ids if complete.get(q, False)]
    correct, joules = np.full(len(query_ids), np.nan), np.full(len(query_ids), np.nan)
    if not ids:
        return correct, joules
    table = rows.drop_duplicates("query_id").set_index("query_id").loc[ids, ["task"]].reset_index()
    m = build_matrix(rows, table.assign(split="test"), "test", energy_column)
    out = cascade_outcome(rows, m, deployed)
    where = {q: i for i, q in enumerate(query_ids)}
    at = [where[q] for q in m.query_ids]
    correct[at], joules[at] = out.correct, out.energy_j
    return correct, joules


def outcomes(picks: list[str], query_ids: list[str], profile: pd.DataFrame, energy_column: str
             ) -> tuple[np.ndarray, np.ndarray]:
    """(correct, joules) of each pick on the labelled profile; NaN where the profile has no label for it."""
    table = profile.set_index(["query_id", "candidate_id"])
    keys = list(zip(query_ids, picks))
    found = table.reindex(keys)
    return (pd.to_numeric(found["correct"], errors="coerce").to_numpy(float),
            pd.to_numeric(found[energy_column], errors="coerce").to_numpy(float))


def paired(candidate: PolicyPicks, serving: PolicyPicks, query_ids: list[str], profile: pd.DataFrame,
           energy_column: str) -> dict:
    """Both policies' per-query outcomes on the queries where both picks are labelled (the rest counted)."""
    c_correct, c_energy = policy_outcomes(candidate, query_ids, profile, energy_column)
    s_correct, s_energy = policy_outcomes(serving, query_ids, profile, energy_column)
    keep = ~(np.isnan(c_correct) | np.isnan(s_correct) | np.isnan(c_energy) | np.isnan(s_energy))
    if not keep.any():
        raise CannotScore(f"no test query has a label for both policies' picks ({len(query_ids)} test queries): "
                          "the labels left them unlabelled (labels/summary.json says why)")
    return {"candidate_correct": c_correct[keep], "candidate_energy": c_energy[keep],
            "serving_correct": s_correct[keep], "serving_energy": s_energy[keep],
            "n_test": len(query_ids), "n_unlabelled": int((~keep).sum()),
            "candidate_picks": _picks(candidate, len(query_ids)), "serving_picks": _picks(serving, len(query_ids))}


def _picks(policy: PolicyPicks, n: int) -> dict:
    """How many test queries went to each candidate (a cascade: to its chain, whose calls its answers decide)."""
    if policy.picks is None:
        return {f"cascade {policy.deployed['name']}": n}
    return dict(pd.Series(policy.picks).value_counts())


def drift(embedding, quantile: float, training: pd.DataFrame, newest: pd.DataFrame) -> dict:
    """The gateway's drift figure (gateway/drift.py) on the newest traffic: the share of ``newest``'s queries whose
    nearest training query (of the policy served now) is farther than the ``quantile`` of the training queries' own
    nearest-neighbour distances; with the task mix of both."""
    from jouleroute.gateway.drift import nearest_distances
    from jouleroute.routing.baselines.embeddings import build_embedder

    train = training[training["split"] == "train"]
    if len(train) < 2 or newest.empty:
        return {}
    embed = build_embedder(embedding.model_copy(update={"cache_dir": None}))
    known = np.asarray(embed(list(train["question"])), dtype=np.float32)
    threshold = float(np.quantile(nearest_distances(known, known, exclude_self=True), quantile))
    distances = nearest_distances(np.asarray(embed(list(newest["question"])), dtype=np.float32), known)
    mix = lambda frame: {t: round(n / len(frame), 4) for t, n in frame["task"].value_counts().items()}  # noqa: E731
    return {"share": float(np.mean(distances > threshold)), "threshold": threshold, "quantile": quantile,
            "n_queries": len(newest), "task_mix_newest": mix(newest), "task_mix_training": mix(train)}
