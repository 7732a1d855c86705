"""What is deployed, decided on selection data: the champion among every contender's selection sweep over the
decision grid, its λ that meets ``router.target``, the best and the reference single, whether routing pays over
them (evaluation/router_champion.py), and how stable each choice is (evaluation/deployed.py).

A learned baseline family is cross-fitted over ``evaluate.selection_folds`` folds of the train and val queries:
each fold is scored by the family fitted on the others (deciding with per-query energy fitted on the same folds
when val adopted it), so every selection query is scored by a router that never saw it, as a test query would be.
The LM router (trained once, on train) is scored on val when it won the val contest. Where the headline counts
the router's own cost, each contender's is measured on the val queries, as on test. The test split is never read
here.
"""

from __future__ import annotations

import logging

import numpy as np

from jouleroute.evaluation.champion import champion_scores
from jouleroute.evaluation.contest import Contest, EvaluateSetup, query_energy_model
from jouleroute.evaluation.deployed import selection_matrix, sweep_outcomes
from jouleroute.evaluation.router_champion import choose_policy
from jouleroute.evaluation.outcomes import ProfileMatrix
from jouleroute.evaluation.overhead import stable_overhead
from jouleroute.evaluation.val_contest import val_queries
from jouleroute.policy.choose import CASCADE, PolicyOutcomes
from jouleroute.policy.kinds import describe
from jouleroute.policy.route import ContenderSweep, choose_deployed
from jouleroute.policy.singles import best_column, draws_energy, singles_on_selection
from jouleroute.policy.target import Target, effective_target
from jouleroute.routing.baselines.query_energy import PerQueryEnergy
from jouleroute.routing.registry import build_router, sample_train

logger = logging.getLogger(__name__)


def decide_deployment(setup: EvaluateSetup, contest: Contest, val_contest: dict) -> dict | None:
    """The deployed policy's choices (module doc); ``None`` when no contender can be scored here."""
    p = setup.params
    cfg, tolerance = p.evaluate, p.evaluate.accuracy_tolerance
    low, high = min(p.router_data.lambdas), max(p.router_data.lambdas)  # the gateway serves only these
    lams = [lam for lam in cfg.decision_grid.lambdas if low - 1e-12 <= lam <= high + 1e-12]
    everything = selection_matrix(contest.profile, contest.queries, p.energy_policy.column)
    singles = singles_on_selection(everything, tolerance, cfg.stability_samples, cfg.seed)
    draws_energy(singles, f"{p.paths.resolve('profile', setup.root)}: column '{p.energy_policy.column}'")
    best = singles["best_single"]["candidate"]
    contenders = deployment_contenders(setup, contest, val_contest, everything, lams, best)
    if not contenders:
        logger.warning("the champion %s cannot be scored here: no deployed point", val_contest["winner"]["name"])
        return None
    target = effective_target(p.router.target)
    others = cascade_contenders(setup, contest, everything, target)
    decision = choose_policy(target, lams, contenders, everything, tolerance, cfg.stability_samples, cfg.seed,
                             cfg.confidence, cfg.noninferiority_margin, others, cfg.bootstrap_samples)
    champion = contenders[decision.pop("index")]
    correct, energy = champion.correct, champion.energy + champion.overhead_j
    choice = choose_deployed(target, lams, correct, energy, champion.best_correct, champion.best_energy, tolerance,
                             cfg.stability_samples, cfg.seed, cfg.confidence)
    sweep = {"lam": list(lams), "accuracy": [float(x) for x in correct.mean(axis=0)],
             "j_per_query": [float(x) for x in energy.mean(axis=0)], "best_single": best,
             "best_single_accuracy": float(champion.best_correct.mean()),
             "best_single_j_per_query": float(champion.best_energy.mean()), "tolerance": tolerance,
             "n_queries": len(champion.query_ids), "data": champion.data, "overhead_j": champion.overhead_j}
    if decision["single_on_selection"]:  # the single the rule picks alone: the reference every gain is read against
        alone = decision["single_on_selection"]
        if alone["name"] != singles["reference_single"]["candidate"]:  # its resampled stability was another's
            singles.get("stability", {}).pop("reference_single", None)
        singles["reference_single"] = {"candidate": alone["name"], "accuracy": alone["accuracy"],
                                       "j_per_query": alone["j_per_query"]}
    served = describe(decision["deployed"])  # policy/kinds.py: each kind's own phrase
    logger.info("deployed on selection data: %s (router champion %s at λ=%g on %d queries, %s: %s; the single model "
                "the target picks alone: %s)", served, champion.name, choice["lam"], len(champion.query_ids),
                champion.data, "meets the target" if choice["met_on_selection"] else choice["reason"],
                decision["single"])
    stability = choice.pop("stability", {}) | decision.pop("stability", {})
    return {"champion": champion.name, "family": champion.family, "chosen_by": choice["target"], **choice,
            **decision, "served": served, "stability": stability,
            "champion_first_on_utility": (val_contest.get("stability") or {}).get("first_on_utility"),
            "val_winner": val_contest["winner"]["name"], "singles": singles, "sweep": sweep}


def cascade_contenders(setup: EvaluateSetup, contest: Contest, everything: ProfileMatrix,
                       target: Target) -> list[PolicyOutcomes]:
    """The cascade as a contender of the deployment: the target's rule scored out of fold over the folds the routers
    are cross-fitted on (policy/cascade_choice.py), so its selection figures carry no winner's curse; the chain it
    would deploy is chosen on every selection query. None when cascades are off or the profile has no answers."""
    from jouleroute.cascade.matrix import answers_missing, cascade_matrix
    from jouleroute.cascade.search import search
    from jouleroute.policy.cascade_choice import Calibration, choose_calibrated, crossfit_outcomes

    cfg = setup.params.evaluate
    if not cfg.cascade.enabled or cfg.selection_folds < 2 or answers_missing(contest.profile) or \
            len(everything.query_ids) < 2 * cfg.selection_folds:
        return []
    m = cascade_matrix(contest.profile, everything)
    if list(m.query_ids) != list(everything.query_ids):
        raise AssertionError("the cascade matrix must keep the selection matrix's query order (paired folds)")
    calibration = Calibration(tuple(cfg.cascade.calibration_slacks), cfg.noninferiority_margin, cfg.selection_folds)
    rule = (cfg.accuracy_tolerance, cfg.bootstrap_samples, cfg.confidence, cfg.seed, cfg.cascade.max_stage_size)
    oof = crossfit_outcomes(m, {"deployed": target}, cfg.selection_folds, *rule, calibration)["deployed"]  # nested
    column = best_column(everything.correct, everything.energy_j)
    space = search(m, everything.candidates[column], max_stage_size=cfg.cascade.max_stage_size)
    chosen = choose_calibrated(space, m, {"deployed": target}, *rule, calibration)["deployed"]
    chain = chosen.chain
    # against the best single on all selection data, the one every other kind is held to (the folds' own best
    # singles chose the chains; the yardstick of the choice across kinds is one)
    data = f"train+val, out of fold over {cfg.selection_folds} folds" + (", nested" if calibration.on else "")
    return [PolicyOutcomes(CASCADE, chain.name, data, list(m.query_ids), oof.correct, oof.energy_j,
                           everything.correct[:, column], everything.energy_j[:, column],
                           {"stages": [list(st) for st in chain.stages], "max_output_tokens": chain.max_output_tokens,
                            "chains_out_of_fold": oof.chains, "slacks_out_of_fold": oof.slacks,
                            "selection": {k: v for k, v in chosen.selection.items() if k != "search_seconds"}})]


def deployment_contenders(setup: EvaluateSetup, contest: Contest, val_contest: dict, everything: ProfileMatrix,
                          lams: list[float], best_single: str) -> list[ContenderSweep]:
    """Every contender's selection sweep: each learned family cross-fitted over train+val (when the baselines were
    fitted on train and ``evaluate.selection_folds`` > 1), and the val winner on val when it is not one of them
    (the LM router: its cost allows no refit). The val winner comes first: it takes exact ties."""
    p, cfg = setup.params, setup.params.evaluate
    asked = val_queries(contest.val_rows) if contest.val_rows else None
    best = everything.candidates.index(best_single)
    out = []
    win = val_contest["winner"]
    crossfit = [f for f in contest.fitted if cfg.selection_folds > 1 and contest.on_train]
    if win["family"] not in crossfit and asked is not None:
        scores = champion_scores(setup, contest, val_contest, asked, "val: deployed λ")
        if scores is not None:
            m = selection_matrix(contest.profile, contest.queries, p.energy_policy.column, only=list(asked["query_id"]))
            b = m.candidates.index(everything.candidates[best])
            correct, energy = sweep_outcomes(m, _choices_in(m.candidates, m.query_ids, scores, lams))
            out.append(ContenderSweep(win["name"], win["family"], "val", list(m.query_ids), correct, energy,
                                      m.correct[:, b], m.energy_j[:, b], _overhead(setup, contest, "lm", scores)))
    data = f"train+val, cross-fitted over {cfg.selection_folds} folds"
    for family in sorted(crossfit, key=lambda f: f != win["family"]):
        uses_energy = bool(((contest.energy_report or {}).get("families") or {}).get(family, {}).get("adopted"))
        choices = crossfit_choices(setup, contest, family, everything, lams, uses_energy)
        correct, energy = sweep_outcomes(everything, choices)
        overhead = _overhead(setup, contest, family, None, asked)
        out.append(ContenderSweep(family, family, data, list(everything.query_ids), correct, energy,
                                  everything.correct[:, best], everything.energy_j[:, best], overhead))
    return out


def _overhead(setup: EvaluateSetup, contest: Contest, family: str, scores=None, asked=None) -> float:
    """The router's own mean J/query on the val queries, measured as on test (and kept with it,
    evaluation/overhead.py), when the headline counts it; 0 when it does not or nothing meters it."""
    if not setup.params.evaluate.include_overhead or family not in contest.overhead_keys:
        return 0.0
    if scores is None:
        if asked is None:
            return 0.0
        scores = contest.fitted[family].score(asked)
    measured = np.asarray(scores.overhead_energy_j, dtype=float)
    if not measured.size or not np.isfinite(measured).all():  # scored without a meter: nothing to count or keep
        logger.warning("%s: its own cost was not metered on the val queries; the deployment counts none for it",
                       family)
        return 0.0
    scores = stable_overhead(scores, contest.overhead_keys[family], setup.overhead_cache)
    return float(np.mean(scores.overhead_energy_j))


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

