"""The deployed point: every choice made on selection data (train and val), then scored once on test.

A deployed system fixes its λ and knows its reference model before it sees a query, so:

- **best** and **reference single** (policy/singles.py): the most accurate candidate on the selection queries (ties
  to the cheaper), and the cheapest within ``evaluate.accuracy_tolerance`` of it: a user's pick without a router;
- **deployed λ**: the champion's λ on ``evaluate.decision_grid`` that meets ``router.target`` (default
  ``iso_accuracy``: accuracy at least the best single's minus the tolerance) on the champion's selection sweep:
  a learned baseline family cross-fitted over ``evaluate.selection_folds`` folds of train+val (each query scored
  by a router that never saw it), the LM router on val (its cost);
- **stability**: the share of bootstrap resamples of the selection data that make the same choice.

``score_deployed`` then scores the deployed point on test against the best and the reference single with paired
bootstrap intervals: the accuracy difference, the energy share of the best single, and the **routing gain**
(J/query of the deployed point over the reference single's). Nothing here reads a test outcome before a choice
is made; the shuffle test in tests/evaluation/test_deployed.py holds that. docs/metrics.md, "The deployed point".
"""

from __future__ import annotations

import logging
from typing import Sequence

import numpy as np
import pandas as pd

from jouleroute.evaluation.outcomes import ProfileMatrix, build_matrix
from jouleroute.policy.kinds import kind_of
from jouleroute.policy.route import score_deployed
from jouleroute.routing.scores import RoutingDecisions

logger = logging.getLogger(__name__)

SELECTION_SPLITS = ("train", "val")


def selection_matrix(profile: pd.DataFrame, queries: pd.DataFrame, energy_column: str,
                     only: Sequence[str] | None = None) -> ProfileMatrix:
    """The train and val queries (or ``only`` these) that every candidate of the profile answered, as one matrix."""
    chosen = queries[queries["split"].isin(SELECTION_SPLITS)]
    if only is not None:
        chosen = chosen[chosen["query_id"].isin(set(only))]
    rows = profile[profile["query_id"].isin(set(chosen["query_id"]))]
    counts = rows.groupby("query_id")["candidate_id"].nunique()
    full = set(counts[counts == profile["candidate_id"].nunique()].index)
    if not full:
        raise ValueError("no train or val query was answered by every candidate: nothing to choose the deployed "
                         "point on (the profile's train and val rows)")
    return build_matrix(rows, chosen[chosen["query_id"].isin(full)].assign(split="selection"), "selection",
                        energy_column)


def sweep_outcomes(m: ProfileMatrix, choices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[queries, λ] correctness and energy of a router's choices ([queries, λ] column indices of ``m``)."""
    rows = np.arange(len(m.query_ids))[:, None]
    return m.correct[rows, choices], m.energy_j[rows, choices]


DEPLOYED = "deployed"  # the deployed point's name among the routers of a report


def deployed_decisions(deployment: dict, scores) -> RoutingDecisions:
    """The deployed point's test decisions: the champion's ``scores`` decided at the deployed λ, or every query
    sent to the single model deployed when routing does not pay on selection data (no router runs: no cost)."""
    chosen, kind = scores.decide(deployment["lam"]), kind_of(deployment)
    if kind.routes or kind.picks is None:  # the router's own decisions and cost (a chain's: they stand in)
        return chosen
    return RoutingDecisions(list(chosen.query_ids), kind.picks(deployment, chosen.candidate_ids))


def deployed_block(m: ProfileMatrix, outcome, deployment: dict, with_overhead: bool, margin: float, samples: int,
                   confidence: float, seed: int) -> dict:
    """report.json's ``deployed``: the choices made on selection data, and the deployed policy's test ``outcome``
    (the champion's decisions at the deployed λ, every query to the single model, or the cascade's calls: an
    ``outcomes.Outcome`` or ``CascadeOutcome``) scored on test against the best and the reference single."""
    singles = deployment["singles"]
    column = lambda name: m.candidates.index(singles[name]["candidate"])  # noqa: E731
    best, ref = column("best_single"), column("reference_single")
    def scored(overhead: bool) -> dict:
        return score_deployed(outcome.correct, outcome.energy(overhead), (m.correct[:, best], m.energy_j[:, best]),
                              (m.correct[:, ref], m.energy_j[:, ref]), margin, samples, confidence, seed)

    test = scored(with_overhead) | {"overhead_metered": outcome.overhead_source != "none",
                                    "view": "with_overhead" if with_overhead else "models_only"}
    serves = kind_of(deployment).serves(deployment)  # a single model or a chain: no router of its own to meter
    if serves:
        test |= {"routing": serves}
    if with_overhead:  # the models' energy alone too: what the router's choices save, before its own cost
        keep = ("j_per_query", "energy_share_of_best", "energy_share_of_best_ci", "routing_gain", "routing_gain_ci",
                "routing")
        test["models_only"] = {k: v for k, v in scored(False).items() if k in keep}
    return {**{k: v for k, v in deployment.items() if k != "sweep"}, "selection_sweep": deployment["sweep"],
            "test": test}
