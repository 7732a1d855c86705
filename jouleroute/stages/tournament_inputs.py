"""The tournament's inputs, built from the params: the tournament runs on them, and grpo's and budget's live
rollouts answer through the same backend (reading its shard store, writing the live-pair cache). Here, so that no stage module imports another; what
the router stages share is in stages/router_training.py, which the tournament never reads."""

from __future__ import annotations

import pandas as pd

from jouleroute.stages.context import StageContext
from jouleroute.tournament.jobs import TournamentInputs
from jouleroute.tournament.served import ModelledRate


def tournament_inputs(ctx: StageContext) -> TournamentInputs:
    p = ctx.params
    return TournamentInputs(
        queries=pd.read_parquet(ctx.path("queries")), pool=p.pool, models=p.models, backend=p.backend,
        energy=p.energy, config=p.tournament, models_dir=ctx.path("models_dir"), shards_dir=ctx.path("shards_dir"),
        profile_path=ctx.path("profile"), data_dir=ctx.path("data_dir"), modelled=modelled_rates(ctx),
        live_pairs_dir=ctx.path("live_pairs_dir"),
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
