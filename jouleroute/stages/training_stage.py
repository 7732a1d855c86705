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
                      tracking_uri=ctx.tracking_uri)
    write_json(ctx.path("sft_dir") / "metrics.json", metrics)
    return metrics


def grpo_stage(ctx: StageContext) -> dict:
    from jouleroute.training.grpo import run_grpo

    ensure_experiment(ctx.tracking_uri, ctx.params.tracking.experiment)
    metrics = run_grpo(ctx.params.grpo, ctx.path("router_data_dir"), ctx.path("sft_dir"), ctx.path("grpo_dir"),
                       tracking_uri=ctx.tracking_uri)
    metrics["heldout"] = heldout_label_accuracy(ctx)
    write_json(ctx.path("grpo_dir") / "metrics.json", metrics)
    return metrics


def heldout_label_accuracy(ctx: StageContext) -> dict:
    """The trained router vs trivial policies (majority label, best constant, random), on held-out (val) queries.

    Val queries never enter training; the test split is left to `evaluate`.
    """
    from jouleroute.energy import make_meter
    from jouleroute.routing.lm_router import LMRouter
    from jouleroute.training.label_eval import label_accuracy, load_rows

    val_path = ctx.path("router_data_dir") / "val.jsonl"
    rows = load_rows(val_path) if val_path.exists() else []
    if not rows:
        logger.warning("no held-out val rows in %s: label accuracy not measured", val_path)
        return {}
    router = LMRouter(ctx.path("grpo_dir") / "model", meter=make_meter(ctx.params.energy), cfg=ctx.params.router)
    train_rows = load_rows(ctx.path("router_data_dir") / "grpo.jsonl")
    result = label_accuracy(router, rows, energy_norm=ctx.params.grpo.energy_norm, train_rows=train_rows)
    overall = result["overall"]
    logger.info("held-out label accuracy %.3f vs majority label %.3f (per-λ majority) / %.3f (global), n=%d",
                overall["label_accuracy"], overall["majority_accuracy"], overall["global_majority_accuracy"],
                overall["n"])
    logger.info("held-out utility: router %.3f; majority %.3f, best constant %.3f, random %.3f; oracle %.3f "
                "(beats trivial: %s)", overall["router_utility"], overall["majority_utility"],
                overall["best_constant_utility"], overall["random_utility"], overall["oracle_utility"],
                overall["beats_trivial"])
    if ctx.tracking_uri:
        import mlflow

        from jouleroute.tracking import mlflow_run

        with mlflow_run(ctx.tracking_uri, ctx.params.tracking.experiment, "grpo-heldout", ctx.tags("grpo")):
            mlflow.log_metrics({f"heldout/{k}": float(v) for k, v in overall.items()})
            mlflow.log_dict(result, "heldout_label_accuracy.json")
    return result


def router_path(ctx: StageContext) -> Path:
    return ctx.path("grpo_dir") / "model"
