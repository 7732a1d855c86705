"""Cascades that read the answers, beside the routers: chosen on selection data, scored once on test.

A cascade asks cheap models first and escalates when their answers disagree (jouleroute/cascade: agreement by
each task's grader equivalence, the chain search, its scoring). For a profile that carries answers the evaluate
stage searches the chains on the selection queries (train and val, every candidate answered), chooses one per
target of ``evaluate.cascade.targets`` (policy/cascade_config.py; by default ``iso_accuracy``, the router's default,
and ``above_best``, above the best single's accuracy by a paired interval on selection; plus the deployed
router's own target when it differs) and scores each once on test against the best single chosen on selection.
Each target's rule is also scored out of fold on the selection data (policy/cascade_choice.py), so the report shows
how much of a chain's selection lead survives the choice. The figure a user decides by: the most accurate chain
at or below the best single's energy on selection, scored on test. A profile without answers says so in one
line. Energy is the models' only (a cascade runs no router): joules summed over every model asked.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd

from jouleroute.atomic import atomic_write_text
from jouleroute.cascade.artifact import ChainArtifact
from jouleroute.cascade.chain import Chain, simulate
from jouleroute.cascade.matrix import answers_missing, cascade_matrix
from jouleroute.cascade.search import pareto, pareto_points, search
from jouleroute.evaluation.bootstrap import family_aiq
from jouleroute.evaluation.deployed import selection_matrix
from jouleroute.evaluation.outcomes import ProfileMatrix
from jouleroute.policy.cascade_choice import (DECISION_TARGET, Calibration, choose_calibrated, crossfit_targets,
                                              decision_figure, score_chain)
from jouleroute.policy.cascade_config import CascadeConfig
from jouleroute.policy.singles import best_column

logger = logging.getLogger(__name__)

DECISION = " decision"  # the decision figure's key among the cross-fitted targets (no configured name has a space)


def cascade_block(profile: pd.DataFrame, queries: pd.DataFrame, test: ProfileMatrix, energy_column: str,
                  best_single: str | None, tolerance: float, margin: float, samples: int, confidence: float,
                  seed: int, cfg: CascadeConfig = CascadeConfig(),
                  router_target: tuple[str, float] | None = None, calibration_folds: int = 5) -> dict:
    """report.json's ``cascade``: the search on selection data, the chain per target scored on test (and its
    rule out of fold on selection), and the decision figure; ``{"skipped": why}`` when the profile carries no
    comparable answers. ``margin``: the non-inferiority margin of the verdicts; ``router_target``: the deployed
    router's (kind, value), chosen for too; ``calibration_folds``: ``evaluate.selection_folds``, as the deployment."""
    started = time.perf_counter()
    missing = answers_missing(profile)
    if missing:
        logger.info("%s", missing)
        return {"skipped": missing}
    try:
        chosen_on = selection_matrix(profile, queries, energy_column)
    except ValueError as e:  # no train or val query every candidate answered
        return {"skipped": f"cascade skipped: {e}"}
    best_single = best_single or chosen_on.candidates[best_column(chosen_on.correct, chosen_on.energy_j)]
    selection, scored = cascade_matrix(profile, chosen_on), cascade_matrix(profile, test)
    space = search(selection, best_single, max_stage_size=cfg.max_stage_size)
    targets = cfg.with_router_target(*(router_target or (None, None)))
    out = {"best_single": best_single, "n_chains": int(space.accuracy.size), "search_seconds": space.seconds,
           "n_selection_queries": len(selection.query_ids), "pareto": pareto_points(space), "targets": {}}
    calibration = Calibration(tuple(cfg.calibration_slacks), margin, calibration_folds)  # the deployment's
    for name, choice in choose_calibrated(space, selection, targets, tolerance, samples, confidence, seed,
                                          cfg.max_stage_size, calibration).items():
        out["targets"][name] = {"chain": choice.chain.name, "selection": choice.selection,
                                "test": score_chain(choice.chain, scored, best_single, margin, samples, confidence, seed)}
    checked = crossfit_targets(selection, targets | {DECISION: DECISION_TARGET}, cfg.cross_fit_folds, tolerance,
                               samples, confidence, seed, cfg.max_stage_size, calibration)
    out["decision"] = decision_figure(space, selection, scored, margin, samples, confidence, seed)
    for name, figures in checked.items():
        (out["decision"] if name == DECISION else out["targets"][name])["out_of_fold"] = figures
    out["test_frontier"], out["aiq"] = _frontier_on_test(space, scored)
    out["seconds"] = time.perf_counter() - started  # the whole section: search, choices, out-of-fold, test
    decided = out["decision"]["test"]
    logger.info("cascade: %d chains searched in %.1f s; the most accurate at or below the best single's energy on "
                "selection, %s, scores %+.3f vs the best single on test (%s)", out["n_chains"], space.seconds,
                decided["chain"], decided["accuracy_diff_vs_best"], decided["verdict"])
    return out


def _frontier_on_test(space, scored) -> tuple[list[dict], float]:
    """The selection frontier's chains, each simulated on test (the plot's cascade line), and their AIQ on test
    (the singles' frontier plus these points, over the singles' cost range, as for a router family)."""
    chains = [space.chain(i) for i in pareto(space)]
    outcomes = [simulate(chain, scored) for chain in chains]
    points = [{"chain": c.name, "accuracy": o.accuracy, "j_per_query": o.j_per_query} for c, o in zip(chains, outcomes)]
    value = family_aiq(scored.correct.mean(axis=0), scored.energy_j.mean(axis=0),
                       np.array([p["accuracy"] for p in points]), np.array([p["j_per_query"] for p in points]))
    return points, value


def write_chain_files(block: dict | None, folder: Path) -> None:
    """The chosen chains as chain files (jouleroute/cascade/artifact.py), one per target, that `jouleroute serve`
    loads with ``gateway.router.kind: cascade``; a note instead when the cascade was skipped."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    if not block or "skipped" in block:
        atomic_write_text(folder / "SKIPPED.txt", ((block or {}).get("skipped") or "cascade off") + "\n")
        return
    for name, entry in block["targets"].items():
        test = entry["test"]
        chain = Chain(tuple(tuple(s) for s in test["stages"]), test["max_output_tokens"])
        ChainArtifact(chain, name, entry["selection"]).write(folder / f"{name}.json")
