"""Stage `router_data`: build SFT/GRPO router datasets (train split).

Labels each training query with a target candidate (label policy) and renders prompts
(paradigm `bare` or `informed`), in TRL's conversational prompt/completion format.
"""

from __future__ import annotations

import logging

import pandas as pd

from jouleroute.stages.context import StageContext

logger = logging.getLogger(__name__)


def router_data_stage(ctx: StageContext) -> dict:
    from jouleroute.training.router_data import run_router_data

    profile = pd.read_parquet(ctx.path("labelled_profile"))
    queries = pd.read_parquet(ctx.path("queries"))
    stats = run_router_data(profile, queries, ctx.params.router_data, ctx.path("router_data_dir"),
                            ctx.params.energy_policy)
    logger.info("router datasets -> %s", ctx.path("router_data_dir"))
    with ctx.stage_run("router_data",
                       energy_source=str(stats.get("energy_source"))) as run:
        if run is not None:
            from jouleroute.evaluation.mlflow_log import flatten

            run.log_metrics({k: v for k, v in flatten(stats).items() if not k.startswith("by_lambda.")})
            run.log_dict(stats, "stats.json")
    return stats
