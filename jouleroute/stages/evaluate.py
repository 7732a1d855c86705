"""Stage `evaluate`: accuracy vs energy for routers, baselines, oracle; the champion and its deployed point.

Reads the profile and the trained routers, then calls the library: fit and score every router
(evaluation/contest.py), choose the champion on val (evaluation/champion.py), decide its deployed λ, best and
reference single on selection data (evaluation/deployment.py), score everything on test (run_evaluate), and
writes the champion artifact (what `jouleroute serve` loads) and its Model Registry version (alias `champion`).
"""

from __future__ import annotations

import json
import logging

import pandas as pd

from jouleroute.energy import make_meter
from jouleroute.evaluation import RouterRun, run_evaluate
from jouleroute.evaluation.champion import (adopt_deployed, champion_artifact, champion_scores,
                                            champion_test_scores, register, val_contest_champion)
from jouleroute.evaluation.contest import EvaluateSetup, fit_contest
from jouleroute.evaluation.deployed import DEPLOYED, deployed_decisions
from jouleroute.policy.kinds import kind_of
from jouleroute.evaluation.deployment import decide_deployment
from jouleroute.evaluation.headline import headline
from jouleroute.evaluation.mlflow_log import flatten
from jouleroute.routing.baselines.simple import mix_of
from jouleroute.routing.champion import clear_champion, save_champion
from jouleroute.routing.families import get_family
from jouleroute.routing.registry import build_router, candidate_order
from jouleroute.stages.context import StageContext
from jouleroute.stages.router_training import grpo_run
from jouleroute.tracking import StageRun, tag_router_version

logger = logging.getLogger(__name__)


# Inputs of dvc.yaml the stage can do without (the CLI checks the others first): without a trained LM
# router, evaluate scores the baselines alone; without val rows, no champion is chosen.
OPTIONAL_INPUTS = ("grpo_dir", "sft_dir", "router_data_dir")


def evaluate_stage(ctx: StageContext):
    """The stage opens its one MLflow run (failed if the body raises) and hands it to the code that logs."""
    with ctx.stage_run("evaluate") as run:  # params: what dvc.yaml says evaluate depends on
        return _evaluate(ctx, run)


def _evaluate(ctx: StageContext, run: StageRun | None):
    p = ctx.params
    setup = EvaluateSetup(p, ctx.root, *(ctx.path(name) for name in ("grpo_dir", "sft_dir", "router_data_dir",
                                                                     "evaluate_dir", "embedding_cache")),
                          progress=ctx.progress)
    profile, labels = _scoring_profile(ctx)
    queries = _sample_split(_labelled_queries(pd.read_parquet(ctx.path("queries")), profile), p.evaluate.split,
                            p.evaluate.max_queries, p.evaluate.seed)
    candidates = candidate_order(profile, p.candidate_ids, p.profile_source)
    meter = make_meter(p.energy)  # the routers' own overhead is measured with the tournament's meters
    contest = fit_contest(setup, profile, queries, candidates, meter)
    runs = contest.runs(list(p.evaluate.lambdas))
    val_contest = val_contest_champion(setup, contest, tracking=bool(ctx.tracking_uri))
    deployment = decide_deployment(setup, contest, val_contest) if val_contest else None
    val_contest = adopt_deployed(val_contest, deployment) if deployment else val_contest
    test_scores = champion_test_scores(setup, contest, val_contest) if deployment else None
    if deployment and kind_of(deployment).picks is not None:  # scored once on test (a cascade: its chain, simulated)
        scores = test_scores or champion_scores(setup, contest, val_contest, contest.test_queries, "test: deployed")
        runs.append(RouterRun(DEPLOYED, DEPLOYED, None, deployed_decisions(deployment, scores)))
    lm_runs = [r for r in runs if r.family == "lm"]
    reference = min(lm_runs, key=lambda r: abs(r.lam - p.router.lam)) if lm_runs else None
    mix = mix_of(reference.decisions) if reference else None  # the random rule's: the LM router's mix
    for rule in [f for f in p.baselines.families if get_family(f).router.reference_rule]:  # random, task_best
        router = build_router(rule, profile, queries, candidates, p.baselines, mix=mix, energy=p.energy_policy)
        runs.append(RouterRun(rule, rule, None, router.route(contest.test_queries)))
    logger.info("evaluating %d router runs on %d %s queries", len(runs), len(contest.test_queries), p.evaluate.split)
    result = run_evaluate(profile, queries, runs, p.evaluate, ctx.path("evaluate_dir"), run_tags=ctx.tags("evaluate"),
                          run=run, val_contest=val_contest, energy=p.energy_policy, deployment=deployment,
                          labels=labels)
    write_headline(ctx, result, run)
    folder = ctx.path("evaluate_dir") / "champion"
    if deployment is None:
        clear_champion(folder, "no champion chosen: no val rows (router_data's val.jsonl), no contender, or a "
                               "champion that cannot be scored here")
    else:
        save_champion(folder, *champion_artifact(setup, contest, val_contest, deployment, test_scores,
                                                 result.mlflow_run_id))
        if kind_of(deployment).write is not None:  # a cascade's chain file: what `jouleroute serve` runs by default
            kind_of(deployment).write(deployment, folder)
        logger.info("champion %s saved with λ=%g in %s", val_contest["winner"]["name"], deployment["lam"], folder)
        kind = kind_of(deployment)  # a single model or a chain is tagged by its kind's name (register's keyword)
        register(val_contest, deployment["lam"], result.mlflow_run_id, ctx.tracking_uri, p.tracking.experiment,
                 registry_provenance(ctx), folder, **({kind.name: kind.tag(deployment)} if kind.tag else {}))
    if lm_runs and result.mlflow_run_id:
        family = result.metrics["families"].get("lm", {})
        tag_router_version(ctx.tracking_uri, p.tracking.experiment, grpo_run(ctx).get("router_version"),
                           {"aiq": family.get("aiq", "n/a"), "lambda_star": family.get("lambda_star", "n/a"),
                            "evaluate_run_id": result.mlflow_run_id})
    logger.info("evaluation written to %s", ctx.path("evaluate_dir"))
    return result


def _scoring_profile(ctx: StageContext) -> tuple[pd.DataFrame, dict]:
    """The labelled profile (selection reads the labels) with its test rows graded on gold where the queries
    carry it (labels/scoring.py), and the report's account of the labels: which trained the policy, how many
    queries they left out, their agreement with gold, and what test was scored on."""
    from jouleroute.labels.scoring import scoring_profile

    profile, scored_on = scoring_profile(pd.read_parquet(ctx.path("labelled_profile")),
                                         pd.read_parquet(ctx.path("profile")), ctx.params.evaluate.split)
    summary = json.loads((ctx.path("labels_dir") / "summary.json").read_text())
    quality = json.loads((ctx.path("labels_dir") / "quality.json").read_text())
    keep = ("source", "reference", "source_label", "queries", "labelled_queries", "unlabelled_queries", "coverage",
            "unlabelled_by_reason", "reference_correct_by_definition", "feedback")
    labels = {k: summary[k] for k in keep if k in summary} | {"test_scored_on": scored_on}
    if quality.get("measured"):
        labels["quality"] = {"overall": _figures(quality["overall"]),
                             "by_task": {t: _figures(q) for t, q in quality["by_task"].items()}}
    return profile, labels


def _labelled_queries(queries: pd.DataFrame, profile: pd.DataFrame) -> pd.DataFrame:
    """The queries the scoring profile holds: a query the labels left out (summary.json counts it) is neither
    trained on nor chosen on; the test split keeps every query that has gold."""
    kept = queries[queries["query_id"].isin(set(profile["query_id"]))]
    if len(kept) < len(queries):
        logger.info("evaluate: %d of %d queries left out by the labels", len(queries) - len(kept), len(queries))
    return kept


def _figures(quality: dict) -> dict:
    return {k: quality.get(k) for k in ("rows", "labelled_rows", "precision", "precision_ci", "recall", "recall_ci",
                                        "agreement", "agreement_ci")}


def registry_provenance(ctx: StageContext) -> dict:
    """What the registered champion records of this run: its git sha and the baselines params that fitted it."""
    return {"git_sha": ctx.tags("evaluate")["git_sha"], "baselines_hash": ctx.section_hash("baselines")}


def write_headline(ctx: StageContext, result, run: StageRun | None) -> None:
    from jouleroute.atomic import atomic_write_text

    figures = headline(result.metrics, ctx.params.router.lam)  # key order kept: `dvc exp show` shows it
    atomic_write_text(ctx.path("headline"), json.dumps(figures, indent=2) + "\n")
    if run is not None:
        run.log_metrics(flatten(figures))  # the same names in MLflow as in `dvc metrics show`
        # the params that tell runs apart (`dvc exp run -S router.lam=...`) were logged when the run opened


def _sample_split(queries: pd.DataFrame, split: str, limit: int | None, seed: int) -> pd.DataFrame:
    """Keep at most ``limit`` queries of ``split`` (seeded); other splits are untouched."""
    in_split = queries["split"] == split
    if limit is None or in_split.sum() <= limit:
        return queries
    keep = queries[in_split].sample(n=limit, random_state=seed)
    logger.info("evaluate.max_queries: scoring %d of %d %s queries (seeded sample)", limit, in_split.sum(), split)
    return pd.concat([queries[~in_split], keep]).reset_index(drop=True)
