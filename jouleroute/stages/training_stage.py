"""Stages `router_data`, `sft` and `grpo`: the LM router, trained on the measured profile."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pandas as pd

from jouleroute.stages.context import StageContext, write_json
from jouleroute.tracking import (StageRun, adopt_run, ensure_experiment, flat_params, lambda_step,
                                 register_router, registered_name, run_tags)

logger = logging.getLogger(__name__)


def router_data_stage(ctx: StageContext) -> dict:
    from jouleroute.training.router_data import run_router_data

    profile = pd.read_parquet(ctx.path("profile"))
    queries = pd.read_parquet(ctx.path("queries"))
    stats = run_router_data(profile, queries, ctx.params.router_data, ctx.path("router_data_dir"))
    logger.info("router datasets -> %s", ctx.path("router_data_dir"))
    with ctx.stage_run("router_data", energy_source=str(stats.get("energy_source"))) as run:
        if run is not None:
            from jouleroute.evaluation.mlflow_log import flatten

            run.log_metrics({k: v for k, v in flatten(stats).items() if not k.startswith("by_lambda.")})
            run.log_dict(stats, "stats.json")
    return stats


def base_model_dir(ctx: StageContext) -> str:
    """`sft.base_model`: a key of `models` (converted by the `models` stage), a local folder or a hub id."""
    name = ctx.params.sft.base_model
    if name in ctx.params.models:
        spec = ctx.params.models[name]
        if spec.source == "pypi-gguf":
            return str(ctx.path("models_dir") / name)
        return spec.path or spec.hub_id or name
    return str(ctx.root / name) if (ctx.root / name).exists() else name


def sft_stage(ctx: StageContext) -> dict:
    from jouleroute.training.common import StepProgress
    from jouleroute.training.sft import run_sft

    ensure_experiment(ctx.tracking_uri, ctx.params.tracking.experiment)
    started = int(time.time() * 1000)
    metrics = run_sft(ctx.params.sft, ctx.path("router_data_dir"), base_model_dir(ctx), ctx.path("sft_dir"),
                      tracking_uri=ctx.tracking_uri, cache_dir=ctx.path("trunk_cache"),
                      callbacks=[StepProgress(ctx.progress, "SFT steps")], progress=ctx.progress)
    metrics["heldout"] = heldout_check(ctx, ctx.path("sft_dir") / "model", "sft")
    metrics["heldout_key"] = _heldout_key(ctx)
    write_json(ctx.path("sft_dir") / "metrics.json", metrics)
    _finish_training_run(ctx, "sft", started, metrics)
    return metrics


def grpo_stage(ctx: StageContext) -> dict:
    """GRPO, then SFT-only vs SFT+GRPO on held-out (val) queries; keeps the better one when configured."""
    from jouleroute.training.common import StepProgress
    from jouleroute.training.grpo import run_grpo

    ensure_experiment(ctx.tracking_uri, ctx.params.tracking.experiment)
    started = int(time.time() * 1000)
    metrics = run_grpo(ctx.params.grpo, ctx.path("router_data_dir"), ctx.path("sft_dir"), ctx.path("grpo_dir"),
                       tracking_uri=ctx.tracking_uri, cache_dir=ctx.path("trunk_cache"),
                       callbacks=[StepProgress(ctx.progress, "GRPO steps")], progress=ctx.progress)
    sft_check = _sft_heldout(ctx)
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
    run = _finish_training_run(ctx, "grpo", started, metrics)
    if run is not None:
        spec = json.loads((ctx.path("router_data_dir") / "router_spec.json").read_text())
        overall = metrics["heldout"].get("overall", {})
        version = register_router(ctx.tracking_uri, ctx.params.tracking.experiment, run.run_id,
                                  ctx.path("grpo_dir") / "model",
                                  {"lambda_min": min(spec["lambdas"]), "lambda_max": max(spec["lambdas"]),
                                   "lambdas": ",".join(f"{x:g}" for x in spec["lambdas"]), "kept": metrics["kept"],
                                   "energy_source": spec.get("energy_source", "none"),
                                   "heldout_utility": overall.get("router_utility", "n/a"),
                                   "git_sha": ctx.tags("grpo")["git_sha"]})
        logger.info("router registered in MLflow: %s version %s", registered_name(ctx.params.tracking.experiment),
                    version)
    return metrics


def _heldout_key(ctx: StageContext) -> str:
    """What a held-out check depends on besides the weights: reused by grpo only when this matches."""
    return ctx.section_hash("router") + ":" + ctx.params.grpo.energy_norm


def _sft_heldout(ctx: StageContext) -> dict:
    """The SFT router's held-out check, from the sft stage's metrics when it was made with the same settings."""
    path = ctx.path("sft_dir") / "metrics.json"
    saved = json.loads(path.read_text()) if path.exists() else {}
    if saved.get("heldout") and saved.get("heldout_key") == _heldout_key(ctx):
        return saved["heldout"]
    return heldout_check(ctx, ctx.path("sft_dir") / "model", "sft")


def _finish_training_run(ctx: StageContext, stage: str, started_ms: int, metrics: dict) -> StageRun | None:
    """Complete the trainer's MLflow run from the stage: tags, the stage's params, held-out accuracy and the
    chosen candidates' mean joules (the same names as in the stage's metrics.json)."""
    run = adopt_run(ctx.tracking_uri, ctx.params.tracking.experiment, stage, started_ms)
    if run is None:
        return None
    spec = json.loads((ctx.path("router_data_dir") / "router_spec.json").read_text())
    run.set_tags(run_tags(stage, ctx.tags(stage), spec.get("energy_source")))
    dump = ctx.params.model_dump(mode="json", by_alias=True)
    run.log_params({**flat_params(stage, dump[stage]), **flat_params("router", dump["router"])})
    for key in ("heldout", "heldout_sft"):
        check = metrics.get(key) or {}
        run.log_metrics({f"{key}.overall.{k}": v for k, v in check.get("overall", {}).items()})
        for lam, row in check.get("by_lambda", {}).items():  # charted against λ
            run.log_metrics({f"{key}.by_lambda.{k}": v for k, v in row.items()}, step=lambda_step(float(lam)))
    run.log_metrics({k: v for k, v in metrics.items() if not isinstance(v, dict)})
    run.log_metrics({f"sft_vs_grpo.{k}": v for k, v in metrics.get("sft_vs_grpo", {}).items()})
    return run


def compare_checks(sft: dict, grpo: dict) -> dict:
    """Per-λ held-out utility of SFT-only vs SFT+GRPO, and the overall difference."""
    if not sft or not grpo:
        return {}
    per_lambda = {lam: {"sft": sft["by_lambda"][lam]["router_utility"], "grpo": row["router_utility"],
                        "best_constant": row["best_constant_utility"]}
                  for lam, row in grpo["by_lambda"].items()}
    return {"by_lambda": per_lambda,
            "grpo_minus_sft_utility": grpo["overall"]["router_utility"] - sft["overall"]["router_utility"]}


def heldout_check(ctx: StageContext, model_dir: Path, name: str) -> dict:
    """A trained router vs trivial policies (majority label, best constant, random), on held-out (val) queries.

    Val queries never enter training; the test split is left to `evaluate`.
    """
    from jouleroute.energy import make_meter
    from jouleroute.evaluation.label_eval import label_accuracy, load_rows
    from jouleroute.routing.lm_router import LMRouter

    val_path = ctx.path("router_data_dir") / "val.jsonl"
    rows = load_rows(val_path) if val_path.exists() else []
    if not rows:
        logger.warning("no held-out val rows in %s: held-out utility not measured", val_path)
        return {}
    router = LMRouter(model_dir, meter=make_meter(ctx.params.energy), cfg=ctx.params.router)
    train_rows = load_rows(ctx.path("router_data_dir") / "train.jsonl")
    _score_with_progress(ctx, router, rows, f"{name} held-out check")
    result = label_accuracy(router, rows, energy_norm=ctx.params.grpo.energy_norm, train_rows=train_rows)
    overall = result["overall"]
    by_lambda = result["by_lambda"].values()
    n = sum(row["n"] for row in by_lambda)  # the chosen candidates' mean joules over every (query, λ) row
    overall["chosen_mean_energy_j"] = sum(row["chosen_mean_energy_j"] * row["n"] for row in by_lambda) / n
    logger.info("%s held-out: utility %.3f vs best constant %.3f, majority %.3f, random %.3f; oracle %.3f "
                "(beats trivial: %s; label accuracy %.3f vs majority %.3f)", name, overall["router_utility"],
                overall["best_constant_utility"], overall["majority_utility"], overall["random_utility"],
                overall["oracle_utility"], overall["beats_trivial"], overall["label_accuracy"],
                overall["majority_accuracy"])
    return result


def _score_with_progress(ctx: StageContext, router, rows: list[dict], label: str) -> None:
    """Score the val queries once with a progress bar; label_accuracy's per-λ routing reuses the scores
    (LMRouter memoizes the last query batch, and every λ group lists the same queries in the same order)."""
    frame = pd.DataFrame(rows)
    first = frame[frame["lam"] == frame["lam"].min()].reset_index(drop=True)
    router.score(first, progress=ctx.progress(len(first), label))


def router_path(ctx: StageContext) -> Path:
    return ctx.path("grpo_dir") / "model"
