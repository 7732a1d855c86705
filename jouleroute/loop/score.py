"""Both policies on the newest held-out traffic: what each deployed policy picks for a query, and what that pick
scored on the iteration's labelled profile.

A deployed policy is read from its champion folder as the gateway reads it (gateway/router_build.py
``champion_router``: a route's router loaded as fitted at its deployed λ, a single model's every query), then asked
to rank each test query as a request would be (the query's text, its task when the router knows it). The pick's
``correct`` (its label: gold, a reference, a vote or feedback) and joules (``energy_policy.column``) come from the
labelled profile, where the tournament answered every test query with every candidate. The gate compares answer
joules: the router's own overhead is the same kind of cost for both and is left out of the pairing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

logger = logging.getLogger(__name__)


class CannotScore(ValueError):
    """A policy the gate cannot score on this traffic; the message says why and what to do."""


@dataclass
class PolicyPicks:
    version: str
    kind: str
    picks: list[str]  # per test query, in the queries' order


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
    kind = deployed_policy(record, str(champion / "champion.json"))["kind"]
    if kind == "cascade":
        raise CannotScore(f"{champion}: a deployed cascade; the loop's gate scores routes and single models (a "
                          "cascade's calls depend on the chain's answers, not one pick): set the loop pipeline's "
                          "policy kinds to route and single")
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
    return PolicyPicks(version, kind, picks)


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
    c_correct, c_energy = outcomes(candidate.picks, query_ids, profile, energy_column)
    s_correct, s_energy = outcomes(serving.picks, query_ids, profile, energy_column)
    keep = ~(np.isnan(c_correct) | np.isnan(s_correct) | np.isnan(c_energy) | np.isnan(s_energy))
    if not keep.any():
        raise CannotScore(f"no test query has a label for both policies' picks ({len(query_ids)} test queries): "
                          "the labels left them unlabelled (labels/summary.json says why)")
    return {"candidate_correct": c_correct[keep], "candidate_energy": c_energy[keep],
            "serving_correct": s_correct[keep], "serving_energy": s_energy[keep],
            "n_test": len(query_ids), "n_unlabelled": int((~keep).sum()),
            "candidate_picks": dict(pd.Series(candidate.picks).value_counts()),
            "serving_picks": dict(pd.Series(serving.picks).value_counts())}


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
