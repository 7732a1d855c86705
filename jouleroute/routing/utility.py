"""Per-query utility, and the label policies built on it (normalization: ``routing.scores``).

The SFT labels and the GRPO rewards use the same definitions, so the label of a
query at weight λ is exactly the candidate the GRPO reward ranks highest:

    utility(c, λ) = correct(c) − λ · norm_energy(c)

where ``norm_energy`` rescales the query's candidate energies to [0, 1]:

* ``max``:    e / max(e)
* ``linear``: (e − min(e)) / (max(e) − min(e))
* ``log``:    the same min-max, on ln(max(e, 1e-9 J)); energies across a pool span orders
              of magnitude, and ``log`` keeps the small models apart.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from jouleroute.best_single import best_single
from jouleroute.routing.base import Router
from jouleroute.routing.scores import best_of, normalize_energy_map, oracle_index, utility


def _energy_order(energy: Mapping[str, float], candidates: list[str]) -> dict[str, tuple[float, int]]:
    # Ties break toward lower energy, then toward the pool's declared order: deterministic.
    return {c: (float(energy[c]), i) for i, c in enumerate(candidates)}


def utilities(correct: Mapping[str, float], energy: Mapping[str, float], lam: float, norm: str) -> dict[str, float]:
    """correct(c) − λ · norm_energy(c) for every candidate of one query."""
    normed = normalize_energy_map({c: float(e) for c, e in energy.items()}, norm)
    return {c: float(utility(float(correct[c]), normed[c], lam)) for c in normed}


def utility_label(
    correct: Mapping[str, int], energy: Mapping[str, float], lam: float, norm: str, candidates: list[str]
) -> str:
    """argmax_c correct(c) − λ · norm_energy(c); ties go to the cheaper candidate."""
    scores = utilities(correct, {c: energy[c] for c in candidates}, lam, norm)
    order = _energy_order(energy, candidates)
    return best_of({c: scores[c] for c in candidates}, order)  # float noise (1 − 0.1·x) never breaks a tie


def shrunk_correct(correct: float, prior: float, strength: float) -> float:
    """p̂ = (correct + k · prior) / (1 + k): one outcome shrunk toward a prior worth ``k = strength`` observations
    (the posterior mean of a Beta prior centred on ``prior``); the labels', router_data's and GRPO's rewards'."""
    return (float(correct) + strength * float(prior)) / (1.0 + strength)


def expected_utility_label(
    correct: Mapping[str, int],
    energy: Mapping[str, float],
    lam: float,
    norm: str,
    candidates: list[str],
    prior: Mapping[str, float],
    prior_strength: float,
) -> str:
    """argmax_c p̂(c) − λ · norm_energy(c), with p̂ the query's own outcome shrunk toward a prior.

    ``p̂(c) = (correct(c) + k · prior(c)) / (1 + k)``: the posterior mean of a Beta prior with
    ``k = prior_strength`` pseudo-observations centred on ``prior(c)`` (the candidate's TRAIN
    accuracy on the query's task) after one observation. One observation is a noisy estimate
    of whether c answers this kind of query: ``utility_label`` (k = 0) trusts it fully and
    labels "cheapest correct", which a router cannot predict on unseen queries; as k grows
    the label moves toward the candidate a router *can* predict, the task's best trade-off.
    Unlike the 0/1 utility, p̂ is continuous, so the label moves with λ below 1 too.
    """
    if prior_strength < 0:
        raise ValueError(f"prior_strength must be >= 0, got {prior_strength}")
    normed = normalize_energy_map({c: energy[c] for c in candidates}, norm)
    order = _energy_order(energy, candidates)
    k = float(prior_strength)

    def score(c: str) -> float:
        return utility(shrunk_correct(correct[c], prior[c], k), normed[c], lam)

    return best_of({c: score(c) for c in candidates}, order)


def cheapest_correct_label(
    correct: Mapping[str, int],
    energy: Mapping[str, float],
    candidates: list[str],
    fallback: str,
    task_accuracy: Mapping[str, float] | None = None,
    mean_energy: Mapping[str, float] | None = None,
) -> str:
    """Lowest-energy candidate that answered correctly; ``fallback`` when none did.

    With an expected correctness in [0, 1], "answered correctly" means the highest expectation (> 0)
    of the query's candidates; on 0/1 outcomes the two readings are the same.

    ``fallback="cheapest"``: the query's cheapest candidate (nobody gets it right, so
    spend as little as possible). ``fallback="most_accurate_on_task"``: the candidate
    with the best TRAIN accuracy on the query's task (ties: lower mean energy), betting
    that the profile's miss was noise.
    """
    if fallback == "cheapest" or max(float(correct[c]) for c in candidates) > 0:
        # the oracle's rule (scores.oracle_index): the cheapest of the most likely right ones, which is the
        # cheapest of all when none is right
        row = oracle_index(np.array([[float(correct[c]) for c in candidates]]),
                           np.array([[float(energy[c]) for c in candidates]]))
        return candidates[int(row[0])]
    if fallback == "most_accurate_on_task":
        if task_accuracy is None or mean_energy is None:
            raise ValueError("fallback 'most_accurate_on_task' needs task_accuracy and mean_energy")
        return candidates[best_single([task_accuracy.get(c, 0.0) for c in candidates],
                                      [mean_energy[c] for c in candidates])]
    raise ValueError(f"unknown fallback '{fallback}'; valid: cheapest, most_accurate_on_task")


# A router in utility on router_data rows (a query at a λ, with every candidate's correctness and energy): the one
# code path of the LM router's val checks (evaluation.label_eval) and the budget curve (training.budget).

def as_table(value: Any) -> dict[str, Any]:
    """A row's per-candidate table, stored as a dict or as its JSON text."""
    return json.loads(value) if isinstance(value, str) else dict(value)


def routed_utilities(router: Router, frame: pd.DataFrame, energy_norm: str):
    """Per λ of ``frame``'s rows (ascending): ``(λ, rows, the router's choices, each row's utility by
    candidate)``. The one place a router is scored in utility on router_data rows."""
    for lam, group in frame.groupby("lam", sort=True):
        group = group.reset_index(drop=True)
        chosen = router.route(group, lam=float(lam)).candidate_ids
        utils = [utilities(as_table(c), as_table(e), float(lam), energy_norm)
                 for c, e in zip(group["correct_by_candidate"], group["energy_by_candidate"])]
        yield float(lam), group, chosen, utils


def chosen_utility(utils: Sequence[Mapping[str, float]], chosen: Sequence[str], lam: float) -> list[float]:
    """Each row's utility of the router's choice (a choice outside the pool scores −1 − λ)."""
    return [u.get(c, -lam - 1.0) for u, c in zip(utils, chosen)]


def query_means(scored: Iterable[tuple[Iterable[str], Iterable[float]]]) -> dict[str, float]:
    """Each query's mean over ``(query ids, their utilities)`` pairs, one pair per λ: the one place a
    query's utility over the λ grid is averaged (the champion's margin and the budget curve resample it)."""
    per_query: dict[str, list[float]] = defaultdict(list)
    for queries, values in scored:
        for query, value in zip(queries, values):
            per_query[str(query)].append(value)
    return {q: sum(v) / len(v) for q, v in sorted(per_query.items())}


def rows_per_query_utility(router: Router, frame: pd.DataFrame, energy_norm: str) -> dict[str, float]:
    """Each query's mean utility over the λ of ``frame`` (rows need query_id, question, task, lam and the
    candidates' correctness and energy): what the champion's margin and the budget curve resample."""
    return query_means((group["query_id"], chosen_utility(utils, chosen, lam))
                       for lam, group, chosen, utils in routed_utilities(router, frame, energy_norm))
