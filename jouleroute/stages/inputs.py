"""What several stages build from the params alike: the tournament's inputs (the tournament runs on them;
grpo's and budget's live rollouts answer through the same backend and shard store) and the resolved base
model of the LM router (sft, budget). Here, so that no stage module imports another."""

from __future__ import annotations

import pandas as pd

from jouleroute.stages.context import StageContext
from jouleroute.tournament.run import TournamentInputs


def tournament_inputs(ctx: StageContext) -> TournamentInputs:
    p = ctx.params
    return TournamentInputs(
        queries=pd.read_parquet(ctx.path("queries")), pool=p.pool, models=p.models, backend=p.backend,
        energy=p.energy, config=p.tournament, models_dir=ctx.path("models_dir"), shards_dir=ctx.path("shards_dir"),
        profile_path=ctx.path("profile"), data_dir=ctx.path("data_dir"),
    )


def base_model_dir(ctx: StageContext) -> str:
    """`sft.base_model`: a key of `models` (converted by the `models` stage), a local folder or a hub id."""
    name = ctx.params.sft.base_model
    if name in ctx.params.models:
        spec = ctx.params.models[name]
        if spec.source == "pypi-gguf":
            return str(ctx.path("models_dir") / name)
        return spec.path or spec.hub_id or name
    return str(ctx.root / name) if (ctx.root / name).exists() else name


RUN_RECORD = "mlflow_run.json"  # in grpo_dir: the grpo stage's MLflow run id and registered router version


def grpo_run(ctx: StageContext) -> dict:
    """The grpo stage's MLflow run, by the id it recorded in its outputs (``grpo_dir/mlflow_run.json``):
    budget writes into that run, evaluate tags its router version. ``{}`` when it recorded none (tracking off)."""
    import json

    path = ctx.path("grpo_dir") / RUN_RECORD
    return json.loads(path.read_text()) if path.is_file() else {}
