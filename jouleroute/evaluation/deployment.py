"""Where the champion is deployed, decided on selection data: its sweep over the decision grid, the λ that meets
``router.target``, the best and the reference single, and how stable each choice is (evaluation/deployed.py).

A learned baseline family is cross-fitted over ``evaluate.selection_folds`` folds of the train and val queries:
each fold is scored by the family fitted on the others, so every selection query is scored by a router that never
saw it, as a test query would be. The LM router (trained once, on train) and a champion that decides with
per-query energy are scored on val. The test split is never read here.
"""

from __future__ import annotations

import logging

import numpy as np

from jouleroute.evaluation.champion import champion_query_energy, champion_scores
from jouleroute.evaluation.contest import Contest, EvaluateSetup, query_energy_model
from jouleroute.evaluation.deployed import choose_deployed, selection_matrix, singles_on_selection, sweep_outcomes
from jouleroute.evaluation.outcomes import ProfileMatrix
from jouleroute.evaluation.selection import val_queries
from jouleroute.routing.baselines.query_energy import PerQueryEnergy
from jouleroute.routing.registry import build_router, sample_train
from jouleroute.routing.target import effective_target

logger = logging.getLogger(__name__)


def decide_deployment(setup: EvaluateSetup, contest: Contest, selection: dict) -> dict | None:
    """The deployed point's choices (module doc); ``None`` when the champion cannot be scored here."""
    p = setup.params
    cfg, tolerance = p.evaluate, p.evaluate.accuracy_tolerance
    low, high = min(p.router_data.lambdas), max(p.router_data.lambdas)  # the gateway serves only these
    lams = [lam for lam in cfg.decision_grid.lambdas if low - 1e-12 <= lam <= high + 1e-12]
    column = p.energy_policy.column
    family = selection["winner"]["family"]
    everything = selection_matrix(contest.profile, contest.queries, column)
    singles = singles_on_selection(everything, tolerance, cfg.stability_samples, cfg.seed)
    if family in contest.fitted and cfg.selection_folds > 1 and contest.on_train:
        choices = crossfit_choices(setup, contest, family, everything, lams, champion_query_energy(selection))
        m = everything
        data = f"train+val, cross-fitted over {cfg.selection_folds} folds"
    else:
        asked = val_queries(contest.val_rows) if contest.val_rows else None
        scores = champion_scores(setup, contest, selection, asked, "val: deployed λ") if asked is not None else None
        if scores is None:
            logger.warning("the champion %s cannot be scored here: no deployed point", selection["winner"]["name"])
            return None
        m = selection_matrix(contest.profile, contest.queries, column, only=list(asked["query_id"]))
        choices = _choices_in(m.candidates, m.query_ids, scores, lams)
        data = "val"
    correct, energy = sweep_outcomes(m, choices)
    best = m.candidates.index(singles["best_single"]["candidate"])
    choice = choose_deployed(effective_target(p.router.target), lams, correct, energy, m.correct[:, best],
                             m.energy_j[:, best], tolerance, cfg.stability_samples, cfg.seed)
    sweep = {"lam": list(lams), "accuracy": [float(x) for x in correct.mean(axis=0)],
             "j_per_query": [float(x) for x in energy.mean(axis=0)], "best_single": m.candidates[best],
             "best_single_accuracy": float(m.correct[:, best].mean()),
             "best_single_j_per_query": float(m.energy_j[:, best].mean()), "tolerance": tolerance,
             "n_queries": len(m.query_ids), "data": data}
    logger.info("deployed point on selection data (%s, %d queries): %s at λ=%g (%s)", data, len(m.query_ids),
                selection["winner"]["name"], choice["lam"],
                "meets the target" if choice["met_on_selection"] else choice["reason"])
    champion = selection.get("stability") or {}
    return {"champion": selection["winner"]["name"], "family": family, "chosen_by": choice["target"],
            **choice, "champion_first_on_utility": champion.get("first_on_utility"), "singles": singles,
            "sweep": sweep}


def _choices_in(candidates: list[str], query_ids: list[str], scores, lams: list[float]) -> np.ndarray:
    """[``query_ids``, λ]: the index in ``candidates`` of what ``scores`` chooses for each query at each λ."""
    columns = np.array([candidates.index(c) for c in scores.candidates])
    position = {q: i for i, q in enumerate(scores.query_ids)}
    rows = [position[q] for q in query_ids]
    return np.stack([columns[scores.choices(lam)[rows]] for lam in lams], axis=1)


def crossfit_choices(setup: EvaluateSetup, contest: Contest, family: str, m: ProfileMatrix, lams: list[float],
                     query_energy: bool = False) -> np.ndarray:
    """[queries of ``m``, λ]: each query's choices by ``family`` fitted on the other folds of ``m``'s queries
    (with ``query_energy``, deciding with per-query energy fitted on the same folds, as the champion does)."""
    p = setup.params
    folds = setup.params.evaluate.selection_folds
    baselines = p.baselines.model_copy(update={"embedding": p.baselines.embedding.model_copy(
        update={"cache_dir": str(setup.embedding_cache)})})
    ids = np.array(m.query_ids)
    fold = np.random.default_rng(p.evaluate.seed).permutation(len(ids)) % folds
    pool = contest.profile[contest.profile["query_id"].isin(set(ids))].assign(split="train")
    asked = contest.queries[contest.queries["query_id"].isin(set(ids))].assign(split="train")
    out = np.zeros((len(ids), len(lams)), dtype=int)
    tick = setup.progress(folds, f"{family}: cross-fitting the selection sweep")
    for k in range(folds):
        held = set(ids[fold == k])
        train = sample_train(pool[~pool["query_id"].isin(held)], baselines)
        router = build_router(family, train, asked, contest.candidates, baselines, energy=p.energy_policy,
                              lam=p.router.lam)
        if query_energy:  # ê_c(x) fitted on the same folds, as the champion's was on train
            router = PerQueryEnergy(router, query_energy_model(setup, contest.candidates, train, asked, "train"),
                                    p.energy_policy.norm)
        scores = router.score(asked[asked["query_id"].isin(held)].reset_index(drop=True))
        out[fold == k] = _choices_in(m.candidates, list(ids[fold == k]), scores, lams)
        tick(1)
    return out

