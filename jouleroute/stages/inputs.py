"""What several stages build from the params alike: the tournament's inputs (the tournament runs on them;
grpo's and budget's live rollouts answer through the same backend and shard store) and the resolved base
model of the LM router (sft, budget). Here, so that no stage module imports another."""

from __future__ import annotations

import pandas as pd

from jouleroute.stages.context import StageContext
from jouleroute.tournament.run import TournamentInputs
from jouleroute.tournament.served import ModelledRate


def tournament_inputs(ctx: StageContext) -> TournamentInputs:
    p = ctx.params
    return TournamentInputs(
        queries=pd.read_parquet(ctx.path("queries")), pool=p.pool, models=p.models, backend=p.backend,
        energy=p.energy, config=p.tournament, models_dir=ctx.path("models_dir"), shards_dir=ctx.path("shards_dir"),
        profile_path=ctx.path("profile"), data_dir=ctx.path("data_dir"), modelled=modelled_rates(ctx),
    )


def modelled_rates(ctx: StageContext) -> dict[str, ModelledRate]:
    """Per-token joules of every served candidate, from its ML.ENERGY reference (read where the replay study
    reads them: the replay section's energy.reference_dir) or its own j_per_output_token."""
    from jouleroute.replay.config import EnergyMapping, EnergyModelConfig
    from jouleroute.replay.energy_model import build_token_model

    p = ctx.params
    reference_cfg = p.replay.energy if p.replay is not None else EnergyModelConfig()
    rates = {}
    for i, cand in enumerate(p.pool):
        energy = cand.energy
        if p.backend.kind != "openai" or energy is None:
            continue
        key = f"pool.{i}.energy"
        if energy.j_per_output_token is not None:
            rates[cand.candidate_id] = ModelledRate(energy.j_per_output_token,
                                                    energy.prefill_share * energy.j_per_output_token,
                                                    "user-supplied figures", f"params:{key}.j_per_output_token")
            continue
        mapping = EnergyMapping(reference=energy.reference, workload=energy.workload,
                                reason=f"the reference named for served candidate {cand.candidate_id}")
        model = build_token_model(mapping, reference_cfg.model_copy(update={"prefill_share": energy.prefill_share}),
                                  ctx.root, key)
        rates[cand.candidate_id] = ModelledRate(model.j_per_output_token, model.j_per_input_token, model.reference,
                                                model.reference_file)
    return rates


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
