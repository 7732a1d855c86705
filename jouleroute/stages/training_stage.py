"""Stages `router_data`, `sft` and `grpo`: the LM router, trained on the measured profile."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from jouleroute.stages.context import StageContext, write_json
from jouleroute.tracking import ensure_experiment

logger = logging.getLogger(__name__)


def router_data_stage(ctx: StageContext) -> dict:
    from jouleroute.training.router_data import run_router_data

    profile = pd.read_parquet(ctx.path("profile"))
    queries = pd.read_parquet(ctx.path("queries"))
    stats = run_router_data(profile, queries, ctx.params.router_data, ctx.path("router_data_dir"))
    logger.info("router datasets -> %s", ctx.path("router_data_dir"))
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
    from jouleroute.training.sft import run_sft

    ensure_experiment(ctx.tracking_uri, ctx.params.tracking.experiment)
    metrics = run_sft(ctx.params.sft, ctx.path("router_data_dir"), base_model_dir(ctx), ctx.path("sft_dir"),
                      tracking_uri=ctx.tracking_uri, cache_dir=ctx.path("trunk_cache"))
    write_json(ctx.path("sft_dir") / "metrics.json", metrics)
    return metrics


def grpo_stage(ctx: StageContext) -> dict:
    """GRPO, then SFT-only vs SFT+GRPO on held-out (val) queries; keeps the better one when configured."""
    from jouleroute.training.grpo import run_grpo

    ensure_experiment(ctx.tracking_uri, ctx.params.tracking.experiment)
    metrics = run_grpo(ctx.params.grpo, ctx.path("router_data_dir"), ctx.path("sft_dir"), ctx.path("grpo_dir"),
                       tracking_uri=ctx.tracking_uri, cache_dir=ctx.path("trunk_cache"))
    sft_check = heldout_check(ctx, ctx.path("sft_dir") / "model", "sft")
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
    result = label_accuracy(router, rows, energy_norm=ctx.params.grpo.energy_norm, train_rows=train_rows)
    overall = result["overall"]
    logger.info("%s held-out: utility %.3f vs best constant %.3f, majority %.3f, random %.3f; oracle %.3f "
                "(beats trivial: %s; label accuracy %.3f vs majority %.3f)", name, overall["router_utility"],
                overall["best_constant_utility"], overall["majority_utility"], overall["random_utility"],
                overall["oracle_utility"], overall["beats_trivial"], overall["label_accuracy"],
                overall["majority_accuracy"])
    if ctx.tracking_uri:
        import mlflow

        from jouleroute.tracking import mlflow_run

        with mlflow_run(ctx.tracking_uri, ctx.params.tracking.experiment, f"{name}-heldout", ctx.tags(name)):
            mlflow.log_metrics({f"heldout/{k}": float(v) for k, v in overall.items()})
            mlflow.log_dict(result, "heldout_label_accuracy.json")
    return result


def router_path(ctx: StageContext) -> Path:
    return ctx.path("grpo_dir") / "model"
