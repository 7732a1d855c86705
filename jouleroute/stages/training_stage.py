"""Stages `router_data`, `sft` and `grpo`: the LM router, trained on the measured profile."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from jouleroute.stages.context import StageContext, write_json

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

    metrics = run_sft(ctx.params.sft, ctx.path("router_data_dir"), base_model_dir(ctx), ctx.path("sft_dir"),
                      tracking_uri=ctx.tracking_uri)
    write_json(ctx.path("sft_dir") / "metrics.json", metrics)
    return metrics


def grpo_stage(ctx: StageContext) -> dict:
    from jouleroute.training.grpo import run_grpo

    metrics = run_grpo(ctx.params.grpo, ctx.path("router_data_dir"), ctx.path("sft_dir"), ctx.path("grpo_dir"),
                       tracking_uri=ctx.tracking_uri)
    write_json(ctx.path("grpo_dir") / "metrics.json", metrics)
    return metrics


def router_path(ctx: StageContext) -> Path:
    return ctx.path("grpo_dir") / "model"
