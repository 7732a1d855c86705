"""Stage `grpo`: GRPO on the SFT router: reward = correctness - lambda x energy.

Rewards are named with weights in params (grpo.rewards). Resumes from the last checkpoint.
Ends with SFT-only vs SFT+GRPO on held-out (val) queries, and registers the router in MLflow.
"""

from __future__ import annotations

import json
import logging

from jouleroute.stages.context import StageContext, write_json
from jouleroute.stages.router_training import RUN_RECORD, heldout_check, log_training_metrics, sft_heldout, training_run
from jouleroute.tracking import register_router, registered_name

logger = logging.getLogger(__name__)


def grpo_stage(ctx: StageContext) -> dict:
    """GRPO, then SFT-only vs SFT+GRPO on held-out (val) queries; keeps the better one when configured."""
    with training_run(ctx, "grpo") as run:
        metrics = _train_and_check(ctx, run)
        log_training_metrics(run, metrics)
        if run is not None:
            full = metrics["profiling"]["full_train_tournament"]
            if full["joules"] is not None:  # unknown when the tournament ran a train share (the budget stage's)
                run.log_metrics({"profiling_j.full_train_tournament": full["joules"],
                                 "profiling_share_of_full_train_tournament":
                                     metrics["profiling"]["share_of_full_train_tournament"]})
            version = _register(ctx, run.run_id, metrics)
            # the run, by id, for the stages that write into it or tag its router (budget, evaluate)
            write_json(ctx.path("grpo_dir") / RUN_RECORD, {"run_id": run.run_id, "router_version": version})
    return metrics


def _train_and_check(ctx: StageContext, run) -> dict:
    from functools import partial

    from jouleroute.stages.tournament_inputs import tournament_inputs
    from jouleroute.training.common import StepProgress
    from jouleroute.training.grpo import run_grpo

    live = None
    if ctx.params.grpo.reward_source == "live":  # rollouts run on the tournament's backend, into the live-pair cache
        from jouleroute.tournament.live import LiveOutcomes

        live = partial(LiveOutcomes, tournament_inputs(ctx))
    metrics = run_grpo(ctx.params.grpo, ctx.path("router_data_dir"), ctx.path("sft_dir"), ctx.path("grpo_dir"),
                       run, cache_dir=ctx.path("trunk_cache"),
                       callbacks=[StepProgress(ctx.progress, "GRPO steps")], progress=ctx.progress,
                       prior_strength=ctx.params.router_data.prior_strength, live=live)
    _compare_to_full_tournament(ctx, metrics["profiling"])
    sft_check = sft_heldout(ctx)
    grpo_check = heldout_check(ctx, ctx.path("grpo_dir") / "model", "grpo")
    metrics["heldout_sft"], metrics["heldout"] = sft_check, grpo_check
    metrics["sft_vs_grpo"] = compare_checks(sft_check, grpo_check)
    worse = metrics["sft_vs_grpo"].get("grpo_minus_sft_utility", 0.0) < 0
    if worse and ctx.params.grpo.keep_best_on_val:
        import shutil

        logger.warning("GRPO lowered the held-out utility (%.4f): keeping the SFT weights as the grpo router",
                       metrics["sft_vs_grpo"]["grpo_minus_sft_utility"])
        target = ctx.path("grpo_dir") / "model"
        shutil.rmtree(target)
        shutil.copytree(ctx.path("sft_dir") / "model", target)
        metrics["heldout"], metrics["kept"] = sft_check, "sft"
    else:
        metrics["kept"] = "grpo"
    write_json(ctx.path("grpo_dir") / "metrics.json", metrics)
    return metrics


def _compare_to_full_tournament(ctx: StageContext, profiling: dict) -> None:
    """The router's profiling joules next to a full tournament of every train query (read after training,
    for the report only: training saw the pairs ``run_grpo`` accounted for and no other)."""
    from jouleroute.training.partial_feedback import pairs_joules
    from jouleroute.training.sft import read_jsonl

    from jouleroute.training.router_data import UNPROFILED

    if (ctx.path("router_data_dir") / UNPROFILED).is_file():  # a train share was run: the full one is not known here
        profiling["full_train_tournament"] = {
            "pairs": None, "joules": None,
            "why": "the tournament ran tournament.train_fraction of the train queries, so train.jsonl holds only "
                   "those; the budget stage completes and bills the full train tournament (budget.json)"}
        profiling["share_of_full_train_tournament"] = None
        return
    pairs, joules = pairs_joules(read_jsonl(ctx.path("router_data_dir") / "train.jsonl"))
    profiling["full_train_tournament"] = {"pairs": pairs, "joules": joules}
    profiling["share_of_full_train_tournament"] = profiling["total_joules"] / joules if joules > 0 else None


def _register(ctx: StageContext, run_id: str, metrics: dict) -> str | None:
    """A new version of the registered router, pointing at the kept weights, in the stage's run."""
    spec = json.loads((ctx.path("router_data_dir") / "router_spec.json").read_text())
    overall = metrics["heldout"].get("overall", {})
    version = register_router(ctx.tracking_uri, ctx.params.tracking.experiment, run_id,
                              ctx.path("grpo_dir") / "model",
                              {"lambda_min": min(spec["lambdas"]), "lambda_max": max(spec["lambdas"]),
                               "lambdas": ",".join(f"{x:g}" for x in spec["lambdas"]), "kept": metrics["kept"],
                               "energy_source": spec.get("energy_source", "none"),
                               "heldout_utility": overall.get("router_utility", "n/a"),
                               "git_sha": ctx.tags("grpo")["git_sha"]})
    logger.info("router registered in MLflow: %s version %s", registered_name(ctx.params.tracking.experiment),
                version)
    return version


def compare_checks(sft: dict, grpo: dict) -> dict:
    """Per-λ held-out utility of SFT-only vs SFT+GRPO, and the overall difference."""
    if not sft or not grpo:
        return {}
    per_lambda = {lam: {"sft": sft["by_lambda"][lam]["router_utility"], "grpo": row["router_utility"],
                        "best_constant": row["best_constant_utility"]}
                  for lam, row in grpo["by_lambda"].items()}
    return {"by_lambda": per_lambda,
            "grpo_minus_sft_utility": grpo["overall"]["router_utility"] - sft["overall"]["router_utility"]}
