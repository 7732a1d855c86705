"""Stage `sft`: supervised fine-tuning of the LM router (TRL SFTTrainer).

Starts from sft.base_model; resumes from the last checkpoint after a kill. Ends with the
router's held-out check on the val split.
"""

from __future__ import annotations

from jouleroute.stages.context import StageContext, write_json
from jouleroute.stages.router_training import (base_model_dir, heldout_check, heldout_key, log_training_metrics,
                                               training_run)


def sft_stage(ctx: StageContext) -> dict:
    from jouleroute.training.common import StepProgress
    from jouleroute.training.sft import run_sft

    with training_run(ctx, "sft") as run:
        share = ctx.params.tournament  # the train queries with a full profile: the tournament's share and draw
        metrics = run_sft(ctx.params.sft, ctx.path("router_data_dir"), base_model_dir(ctx), ctx.path("sft_dir"),
                          run, share=share.train_fraction, share_seed=share.seed, cache_dir=ctx.path("trunk_cache"),
                          callbacks=[StepProgress(ctx.progress, "SFT steps")], progress=ctx.progress)
        metrics["heldout"] = heldout_check(ctx, ctx.path("sft_dir") / "model", "sft")
        metrics["heldout_key"] = heldout_key(ctx)
        write_json(ctx.path("sft_dir") / "metrics.json", metrics)
        log_training_metrics(run, metrics)
    return metrics
